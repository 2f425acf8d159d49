// Package sqldb is how internal/sqlstore reaches its database: the handles of one database (the
// primary, the release path's own connections, the read replicas), transactions that run again
// when the server rolled them back for a conflict and report after COMMIT what they wrote, reads
// that may be served by a replica, and the one mapping of driver errors to the store's sentinels.
// It knows no table and decides nothing: what is read and written is sqlstore's. It must not import
// internal/sqlstore, nor anything that does.
package sqldb

import (
	"context"
	"errors"
	"sync/atomic"

	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/engine/replica"
)

// DB is one database as every capability of the store reaches it. Release and Replicas are set
// before the store is used; the hooks (OnEvents, OnRefunds, OnDrift) may be set at any time.
type DB struct {
	Primary *gorm.DB
	// Release is the release path's own connections to the same database (sqlstore's
	// UseForReleases); Primary when it has none.
	Release *gorm.DB
	// Replicas serve the reads that may be stale (StaleRead); nil: every read on the primary.
	Replicas *replica.Set
	MySQL    bool // false: the embedded SQLite

	onEvents  atomic.Pointer[func()]
	onRefunds atomic.Pointer[func()]
	onDrift   atomic.Pointer[func(slots int)]
}

// New is the database behind db, with no connections of the release path's own and no replicas.
func New(db *gorm.DB) *DB {
	return &DB{Primary: db, Release: db, MySQL: db.Dialector.Name() == "mysql"}
}

// WithContext is the primary's handle under ctx: what every statement outside a transaction uses,
// unless it is a read that may be stale (StaleRead) or the release path's.
func (d *DB) WithContext(ctx context.Context) *gorm.DB { return d.Primary.WithContext(ctx) }

// OnEvents sets f to run after every commit that wrote outbox events (MarkEvents). f must not block.
func (d *DB) OnEvents(f func()) { d.onEvents.Store(&f) }

// OnRefunds sets f to run after every commit that wrote refunds (MarkRefunds). f must not block.
func (d *DB) OnRefunds(f func()) { d.onRefunds.Store(&f) }

// OnDrift sets f to run after every commit whose changes gave back units the capacity ledger did
// not count (MarkDrift), with how many slots did so. f must not block.
func (d *DB) OnDrift(f func(slots int)) { d.onDrift.Store(&f) }

// EventsWritten runs the OnEvents hook, for events written outside a transaction.
func (d *DB) EventsWritten() {
	if f := d.onEvents.Load(); f != nil {
		(*f)()
	}
}

// StaleRead runs read, a read that may be stale by up to the replicas' lag bound, on a replica, or on
// the primary when there are no replicas or fresh says the reader changed what it reads a moment
// ago. A replica's failure is never the request's: read runs again on the primary, and the replicas
// are probed at once. read may run twice and must reset what it fills.
func (d *DB) StaleRead(ctx context.Context, fresh bool, read func(db *gorm.DB) error) error {
	if d.Replicas == nil || fresh {
		return read(d.Primary.WithContext(ctx))
	}
	rctx, cancel := context.WithTimeout(ctx, d.Replicas.ReadTimeout())
	err := read(d.Replicas.DB().WithContext(rctx))
	cancel()
	if err == nil || errors.Is(err, gorm.ErrRecordNotFound) || ctx.Err() != nil {
		return err
	}
	d.Replicas.ReadFailed()
	return read(d.Primary.WithContext(ctx))
}
