// Package sqlstore is slotwheel's durable truth in MySQL (or the embedded SQLite) through GORM and
// models/: bookings with their version-checked changes, status history and outbox events, payments,
// the catalog and its inventory, the waitlist and idempotency records. Transactions stay inside it;
// driver errors are mapped to sentinels once, by its plumbing in internal/sqlstore/sqldb
// (ErrDuplicate, ErrCommitUnknown, and booking.ErrStorageUnavailable for everything that means "the
// database did not answer"). It decides nothing: the engine and engine/booking do.
package sqlstore

import (
	"context"

	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/engine/replica"
	"github.com/slotwheel/slotwheel/internal/sqlstore/sqldb"
)

// Store is the SQL store of one database: the assembly of its capabilities, each a type of its own
// that owns its tables' reads and writes (Bookings, Releases, Catalog, Payments, Outbox, Waitlist,
// Idempotency, Erasure, Ledger). Each holds the database (sqldb.DB: its handles, transactions,
// replica reads) and, beside it, only the capabilities whose tables its transactions also write: a
// booking change writes its refunds (Payments) and its ledger moves (Ledger), a schedule change
// counts the ledger again. Their methods are Store's through embedding; what Store declares itself
// configures them (UseForReleases, UseReplicas, the refund renderer and the hooks) or checks the
// database (Ping, DB). A new operation goes to the capability whose tables it owns, or makes a new
// one, never to Store. A method name is unique across the capabilities: two promoted from the same
// depth would be ambiguous, and every caller of it on Store would stop compiling.
type Store struct {
	db *sqldb.DB
	*Bookings
	*Releases
	*Catalog
	*Payments
	*Outbox
	*Waitlist
	*Idempotency
	*Erasure
	*Ledger
	*Ops
}

// New builds a Store on db. Events of booking changes are rendered by r (see Renderer).
func New(db *gorm.DB, r Renderer) *Store {
	d := sqldb.New(db)
	ledger := &Ledger{db: d}
	payments := &Payments{db: d}
	bookings := &Bookings{db: d, render: r, ledger: ledger, payments: payments}
	return &Store{db: d, Bookings: bookings, Releases: &Releases{db: d, bookings: bookings},
		Catalog: &Catalog{db: d, ledger: ledger}, Payments: payments, Outbox: &Outbox{db: d},
		Waitlist: &Waitlist{db: d}, Idempotency: &Idempotency{db: d}, Erasure: &Erasure{db: d}, Ledger: ledger, Ops: &Ops{db: d}}
}

// Sentinels of this store, declared in sqldb, which maps driver errors to them.
var (
	// ErrCommitUnknown: COMMIT was sent and no answer came back (the connection died, a timeout).
	// The transaction may or may not have committed; only a later read can tell.
	ErrCommitUnknown = sqldb.ErrCommitUnknown
	// ErrDuplicate: a unique key refused the write.
	ErrDuplicate = sqldb.ErrDuplicate
)

// MeasureWithoutLedger turns the capacity ledger off, for a benchmark that measures its cost beside
// a store that keeps it. Nothing else may call it: without the ledger MySQL refuses no oversell.
func (s *Store) MeasureWithoutLedger() { s.Ledger.off = true }

// OnRefunds sets f to run after every write that committed refunds to request (the loop that sends
// them to their provider is woken). f must not block.
func (s *Store) OnRefunds(f func()) { s.db.OnRefunds(f) }

// OnLedgerDrift sets f to run, after a commit, when a change gave back units the ledger did not
// count (a drift that reconciliation's check repairs). f must not block.
func (s *Store) OnLedgerDrift(f func(slots int)) { s.db.OnDrift(f) }

// OnEvents sets f to run after every write that committed outbox events (the relay is woken to
// deliver them at once instead of at its next tick). f must not block.
func (s *Store) OnEvents(f func()) { s.db.OnEvents(f) }

// SetRefundRenderer sets how refund events are rendered; without one, refunds announce nothing.
func (s *Store) SetRefundRenderer(r RefundRenderer) { s.Payments.renderRefund = r }

// UseForReleases gives the release path (the due index, the release transactions, the release
// modes) connections of its own, to the same database: under a booking load that fills the main
// pool, a release would otherwise wait for a connection behind every hold and confirm, and a
// no-show's slot would come back late (issue 18's busy case: p99 373 ms, most of it waiting for a
// connection). Call it before the store is used.
func (s *Store) UseForReleases(db *gorm.DB) { s.db.Release = db }

// UseReplicas sends the reads README's routing table names as replica-safe (ListBookings, History,
// Deliveries, Refunds: the lists) to rs's replicas. Every other read, and every read in a
// transaction, stays on the primary: they go through its handle, which has no resolver (see
// sqldb.DB.StaleRead). Call it before the store is used.
func (s *Store) UseReplicas(rs *replica.Set) { s.db.Replicas = rs }

// DB returns the underlying handle, for tests and readiness checks.
func (s *Store) DB() *gorm.DB { return s.db.Primary }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	sqlDB, err := s.db.Primary.DB()
	if err != nil {
		return sqldb.MapErr("ping", err)
	}
	return sqldb.MapErr("ping", sqlDB.PingContext(ctx))
}
