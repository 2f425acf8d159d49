package sqldb

import (
	"context"
	"errors"
	"fmt"

	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// txState is what a transaction's statements tell Tx about it (through the Mark functions), for
// what it does once the transaction commits.
type txState struct {
	events  bool
	refunds bool
	drift   int // ledger slots that could not give back what a change said they held
	// The owners and ids of the bookings written, for read-your-writes (replica.Set.Wrote).
	users    []string
	bookings []uint64
}

type txStateKey struct{}

// state is tx's state, nil outside a transaction of Tx.
func state(tx *gorm.DB) *txState {
	st, _ := tx.Statement.Context.Value(txStateKey{}).(*txState)
	return st
}

// MarkEvents records, in tx's state, that it wrote outbox events: its commit runs OnEvents.
func MarkEvents(tx *gorm.DB) {
	if st := state(tx); st != nil {
		st.events = true
	}
}

// MarkRefunds records, in tx's state, that it wrote refunds: its commit runs OnRefunds.
func MarkRefunds(tx *gorm.DB) {
	if st := state(tx); st != nil {
		st.refunds = true
	}
}

// MarkDrift records, in tx's state, that slots ledger slots could not give back what its changes
// said they held: its commit runs OnDrift.
func MarkDrift(tx *gorm.DB, slots int) {
	if st := state(tx); st != nil {
		st.drift += slots
	}
}

// MarkWrote records, in tx's state, that it wrote booking id of user: the replicas are told once it
// ends, so that the user's next reads see it.
func MarkWrote(tx *gorm.DB, user string, id uint64) {
	if st := state(tx); st != nil {
		st.users = append(st.users, user)
		st.bookings = append(st.bookings, id)
	}
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

// Tx runs fn in a transaction on the primary, retrying it when the server rolled it back for a
// conflict. On MySQL it runs at READ COMMITTED, which models sets on each connection it opens
// (SQLite serialises anyway). A failure of COMMIT itself is ErrCommitUnknown: the caller must find
// out from the data whether it happened. op names the operation in errors (see MapErr).
func (d *DB) Tx(ctx context.Context, op string, fn func(tx *gorm.DB) error) error {
	return d.TxOn(ctx, d.Primary, op, fn)
}

// TxOn is Tx on db's connections.
func (d *DB) TxOn(ctx context.Context, db *gorm.DB, op string, fn func(tx *gorm.DB) error) error {
	st := &txState{}
	ctx = context.WithValue(ctx, txStateKey{}, st)
	for attempt := 0; ; attempt++ {
		st.events, st.refunds, st.drift, st.users, st.bookings = false, false, 0, st.users[:0], st.bookings[:0]
		tx := db.WithContext(ctx).Begin()
		if tx.Error != nil {
			return MapErr(op, tx.Error)
		}
		if err := fn(tx); err != nil {
			tx.Rollback()
			if retryable(err) && attempt < 4 {
				continue
			}
			return MapErr(op, err)
		}
		err := tx.Commit().Error
		if d.Replicas != nil {
			// Before a retry or an unknown outcome too: the writer's next reads must see whatever
			// did commit.
			d.Replicas.Wrote(st.users, st.bookings)
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
			d.EventsWritten()
		}
		if f := d.onRefunds.Load(); f != nil && st.refunds {
			(*f)()
		}
		if f := d.onDrift.Load(); f != nil && st.drift > 0 {
			(*f)(st.drift)
		}
		return nil
	}
}
