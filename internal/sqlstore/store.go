// Package sqlstore is slotwheel's durable truth in MySQL (or the embedded SQLite) through GORM and
// models/: bookings with their version-checked changes, status history and outbox events, payments,
// the catalog and its inventory, the waitlist and idempotency records. Transactions stay inside it;
// driver errors are mapped to sentinels here once (ErrDuplicate, ErrCommitUnknown, and
// booking.ErrStorageUnavailable for everything that means "the database did not answer"). It decides
// nothing: the engine and engine/booking do.
package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/replica"
)

// Store is the SQL store of one database: the assembly of its capabilities, each a type of its own
// that owns its tables' reads and writes (Bookings, Releases, Catalog, Payments, Outbox, Waitlist,
// Idempotency, Erasure, Ledger), over the plumbing they share. Their methods are Store's through
// embedding; what Store declares itself configures the plumbing (UseForReleases, UseReplicas, the
// renderers and hooks) or checks the database (Ping, DB). A new operation goes to the capability
// whose tables it owns, or makes a new one, never to Store. A method name is unique across the
// capabilities: two promoted from the same depth would be ambiguous, and every caller of it on Store
// would stop compiling.
type Store struct {
	*shared
	*Bookings
	*Releases
	*Catalog
	*Payments
	*Outbox
	*Waitlist
	*Idempotency
	*Erasure
	*Ledger
}

// shared is the plumbing every capability of a Store holds a pointer to: the database handles, the
// release path's pool and the replicas, the transaction helper, the renderers and the hooks a
// commit runs. Its methods are the helpers that run inside more than one capability's transactions
// (a booking change writes its refunds and ledger moves; a schedule change counts the ledger again).
type shared struct {
	db           *gorm.DB
	release      *gorm.DB     // the release path's own connections (UseForReleases); db without them
	replicas     *replica.Set // nil: every read on the primary (UseReplicas)
	mysql        bool
	render       Renderer
	renderRefund RefundRenderer
	onEvents     atomic.Pointer[func()]
	onDrift      atomic.Pointer[func(slots int)]
	onRefunds    atomic.Pointer[func()]
	noLedger     bool // MeasureWithoutLedger
}

// MeasureWithoutLedger turns the capacity ledger off, for a benchmark that measures its cost beside
// a store that keeps it. Nothing else may call it: without the ledger MySQL refuses no oversell.
func (s *Store) MeasureWithoutLedger() { s.noLedger = true }

// OnRefunds sets f to run after every write that committed refunds to request (the loop that sends
// them to their provider is woken). f must not block.
func (s *Store) OnRefunds(f func()) { s.onRefunds.Store(&f) }

// OnLedgerDrift sets f to run, after a commit, when a change gave back units the ledger did not
// count (a drift that reconciliation's check repairs). f must not block.
func (s *Store) OnLedgerDrift(f func(slots int)) { s.onDrift.Store(&f) }

// applyLedger writes the moves of a transaction's changes onto the capacity ledger (see
// ledgerMoves.apply); a drift found on the way is reported once the transaction commits.
func (s *shared) applyLedger(tx *gorm.DB, l *ledgerMoves) error {
	if s.noLedger {
		return nil
	}
	n, err := l.apply(tx)
	if err != nil || n == 0 {
		return err
	}
	if st, ok := tx.Statement.Context.Value(txStateKey{}).(*txState); ok {
		st.drift += n
	}
	return nil
}

// OnEvents sets f to run after every write that committed outbox events (the relay is woken to
// deliver them at once instead of at its next tick). f must not block.
func (s *Store) OnEvents(f func()) { s.onEvents.Store(&f) }

func (s *shared) eventsWritten() {
	if f := s.onEvents.Load(); f != nil {
		(*f)()
	}
}

// txState is what a transaction's statements tell tx about it.
type txState struct {
	events  bool
	refunds bool
	drift   int // ledger slots that could not give back what a change said they held
	// The owners and ids of the bookings written, for read-your-writes (replica.Set.Wrote).
	users    []string
	bookings []uint64
}

type txStateKey struct{}

// markEvents records, in tx's state, that it wrote outbox events.
func markEvents(tx *gorm.DB) {
	if st, ok := tx.Statement.Context.Value(txStateKey{}).(*txState); ok {
		st.events = true
	}
}

// markWrote records, in tx's state, that it wrote a booking of user.
func markWrote(tx *gorm.DB, user string, id uint64) {
	if st, ok := tx.Statement.Context.Value(txStateKey{}).(*txState); ok {
		st.users = append(st.users, user)
		st.bookings = append(st.bookings, id)
	}
}

// New builds a Store on db. Events of booking changes are rendered by r (see Renderer).
func New(db *gorm.DB, r Renderer) *Store {
	sh := &shared{db: db, release: db, mysql: db.Dialector.Name() == "mysql", render: r}
	return &Store{shared: sh, Bookings: &Bookings{sh}, Releases: &Releases{sh}, Catalog: &Catalog{sh},
		Payments: &Payments{sh}, Outbox: &Outbox{sh}, Waitlist: &Waitlist{sh}, Idempotency: &Idempotency{sh},
		Erasure: &Erasure{sh}, Ledger: &Ledger{sh}}
}

// UseForReleases gives the release path (the due index, the release transactions, the release
// modes) connections of its own, to the same database: under a booking load that fills the main
// pool, a release would otherwise wait for a connection behind every hold and confirm, and a
// no-show's slot would come back late (issue 18's busy case: p99 373 ms, most of it waiting for a
// connection). Call it before the store is used.
func (s *Store) UseForReleases(db *gorm.DB) { s.release = db }

type releasePathKey struct{}

// OnReleasePath marks ctx as the release path's: the catalog reads made under it (a release batch's
// venues and rules, see catalogDB) use the release path's connections too.
func OnReleasePath(ctx context.Context) context.Context {
	return context.WithValue(ctx, releasePathKey{}, true)
}

// catalogDB is the pool a catalog read under ctx uses: the release path's own under OnReleasePath.
func (s *shared) catalogDB(ctx context.Context) *gorm.DB {
	if on, _ := ctx.Value(releasePathKey{}).(bool); on {
		return s.release.WithContext(ctx)
	}
	return s.db.WithContext(ctx)
}

// UseReplicas sends the reads README's routing table names as replica-safe (ListBookings, History,
// Deliveries, Refunds: the lists) to rs's replicas. Every other read, and every read in a
// transaction, stays on the primary: they go through db, which has no resolver. Call it before the
// store is used.
func (s *Store) UseReplicas(rs *replica.Set) { s.replicas = rs }

// staleRead runs read, a read that may be stale by up to the replicas' lag bound, on a replica, or on
// the primary when the store has no replicas or fresh says the reader changed what it reads a moment
// ago. A replica's failure is never the request's: read runs again on the primary, and the replicas
// are probed at once. read may run twice and must reset what it fills.
func (s *shared) staleRead(ctx context.Context, fresh bool, read func(db *gorm.DB) error) error {
	if s.replicas == nil || fresh {
		return read(s.db.WithContext(ctx))
	}
	rctx, cancel := context.WithTimeout(ctx, s.replicas.ReadTimeout())
	err := read(s.replicas.DB().WithContext(rctx))
	cancel()
	if err == nil || errors.Is(err, gorm.ErrRecordNotFound) || ctx.Err() != nil {
		return err
	}
	s.replicas.ReadFailed()
	return read(s.db.WithContext(ctx))
}

// DB returns the underlying handle, for tests and readiness checks.
func (s *Store) DB() *gorm.DB { return s.db }

// Sentinels of this store.
var (
	// ErrCommitUnknown: COMMIT was sent and no answer came back (the connection died, a timeout).
	// The transaction may or may not have committed; only a later read can tell.
	ErrCommitUnknown = errors.New("commit outcome unknown")
	// ErrDuplicate: a unique key refused the write.
	ErrDuplicate = errors.New("duplicate key")
	// errStale: the row changed between read and version-checked update.
	errStale = errors.New("changed concurrently")
	// errNotFound is mapped to booking.ErrNotFound by callers that want it.
	errNotFound = booking.ErrNotFound
)

// mapErr maps a driver or GORM error to this store's sentinels, keeping the cause.
func mapErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gorm.ErrRecordNotFound):
		return errNotFound
	case errors.Is(err, gorm.ErrDuplicatedKey):
		return fmt.Errorf("%s: %w", op, ErrDuplicate)
	case errors.Is(err, ErrCommitUnknown), errors.Is(err, errStale), errors.Is(err, ErrDuplicate), errors.Is(err, ErrOverCapacity):
		return err
	}
	if _, ok := booking.AsError(err); ok {
		return err
	}
	return fmt.Errorf("sql %s: %w: %w", op, booking.ErrStorageUnavailable, err)
}

// retryable reports an error after which the transaction was certainly rolled back by the server and
// may simply run again: a deadlock, a lock wait timeout, or an optimistic write conflict (TiDB
// reports those at commit).
func retryable(err error) bool {
	var me *mysqldriver.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1213, // ER_LOCK_DEADLOCK
		1205, // ER_LOCK_WAIT_TIMEOUT
		9007, // TiDB: write conflict
		8002, // TiDB: SELECT FOR UPDATE conflict
		8022: // TiDB: transaction retry failed
		return true
	}
	return false
}

// tx runs fn in a transaction, retrying it when the server rolled it back for a conflict. On MySQL it
// runs at READ COMMITTED, which models sets on each connection it opens (SQLite serialises anyway).
// A failure of COMMIT itself is ErrCommitUnknown: the caller must find out from the data whether it
// happened.
func (s *shared) tx(ctx context.Context, op string, fn func(tx *gorm.DB) error) error {
	return s.txOn(ctx, s.db, op, fn)
}

// txOn is tx on db's connections.
func (s *shared) txOn(ctx context.Context, db *gorm.DB, op string, fn func(tx *gorm.DB) error) error {
	st := &txState{}
	ctx = context.WithValue(ctx, txStateKey{}, st)
	for attempt := 0; ; attempt++ {
		st.events, st.refunds, st.drift, st.users, st.bookings = false, false, 0, st.users[:0], st.bookings[:0]
		tx := db.WithContext(ctx).Begin()
		if tx.Error != nil {
			return mapErr(op, tx.Error)
		}
		if err := fn(tx); err != nil {
			tx.Rollback()
			if retryable(err) && attempt < 4 {
				continue
			}
			return mapErr(op, err)
		}
		err := tx.Commit().Error
		if s.replicas != nil {
			// Before a retry or an unknown outcome too: the writer's next reads must see whatever
			// did commit.
			s.replicas.Wrote(st.users, st.bookings)
		}
		if err != nil {
			if retryable(err) && attempt < 4 {
				continue
			}
			// Unavailable too: a caller that cannot resolve the outcome (a check-in, a cancel) answers
			// 503 and the client's retry finds out; confirm and reschedule look for ErrCommitUnknown first.
			return fmt.Errorf("sql %s: %w (%w): %w", op, ErrCommitUnknown, booking.ErrStorageUnavailable, err)
		}
		if st.events {
			s.eventsWritten()
		}
		if f := s.onRefunds.Load(); f != nil && st.refunds {
			(*f)()
		}
		if f := s.onDrift.Load(); f != nil && st.drift > 0 {
			(*f)(st.drift)
		}
		return nil
	}
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return mapErr("ping", err)
	}
	return mapErr("ping", sqlDB.PingContext(ctx))
}
