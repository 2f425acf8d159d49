package engine

import (
	"sync"
	"sync/atomic"

	"github.com/slotwheel/slotwheel/engine/idem"
	"github.com/slotwheel/slotwheel/engine/notify/webhook"
	"github.com/slotwheel/slotwheel/engine/release"
)

// The engine's capability services. Each owns the methods of its files; it reaches the shared stores
// through core and another capability only through the fields it names, so that what a capability
// depends on is written here once. Engine assembles them (assemble) and offers their methods.
// Releasing no-shows is a service of its own package, engine/release, built on core's stores with
// ports over these (assembleReleases, releases.go).

// Catalog owns venues (their release mode too), resources, services, schedules and policies, and
// loading a day's inventory into Redis (catalog.go, schedule.go, availability.go, policy.go).
type Catalog struct {
	*core
	bookings *Bookings // a schedule change cancels the bookings it strands
	holds    *Holds
}

// Holds owns holds and their expiry (the wheel), keyed holds, a user's freeze and the request limit,
// and the waitlist, whose promotion is a hold (holds.go, holdonce.go, waitlist.go, the wheel in
// loops.go).
type Holds struct {
	*core
	wheel   wheel
	freezes freezeSweep
	// holdIdem keeps the records of keyed holds that their script cannot write (HoldOnce).
	holdIdem *idem.Redis
	bookings *Bookings
	catalog  *Catalog
	payments *Payments        // an expired or cancelled hold's WeChat order is closed
	upkeep   *Upkeep          // the wheel repairs a hold it cannot settle
	releases *release.Service // the freezes loop reads back as far as a release run may last
}

// Bookings owns a booking after its confirm: reads, cancel, check-in, restore, reschedule, erasure,
// and the timers and units a booking change moves (bookings.go, reschedule.go, erase.go).
type Bookings struct {
	*core
	// timersSoon, set by NewLoops, tells the release and reminder loops of a booking of this process
	// whose release or reminder is due before their next look at SQL.
	timersSoon atomic.Value // func(b *sqlstore.Booking)
	catalog    *Catalog
	holds      *Holds
	payments   *Payments // a change the capacity ledger refused rebuilds the venue
	upkeep     *Upkeep
}

// Payments owns confirming a hold into a booking, WeChat Pay, refunds and the capacity ledger
// (confirm.go, wechatpay.go, refunds.go, ledger.go).
type Payments struct {
	*core
	// rebuilds are the rebuilds of venues' Redis state that ledger refusals asked for.
	rebuilds rebuilds
	bookings *Bookings
	catalog  *Catalog
	holds    *Holds
	upkeep   *Upkeep
}

// Notifications owns what the engine tells people: the outbox relay, webhooks, WeChat messages and
// reminders (deliver.go, notify.go, the reminders of loops.go).
type Notifications struct {
	*core
	senderOnce sync.Once
	sender     *webhook.Sender // webhookSender's default
}

// Upkeep owns reconciliation of Redis against SQL, repairs after a Redis failover or data loss, and
// the statistics collector (reconcile.go, failover.go, stats.go).
type Upkeep struct {
	*core
	// primary is the identity of the Redis primaries last seen (watchPrimary).
	primary  atomic.Value
	bookings *Bookings
	catalog  *Catalog
	payments *Payments
	releases *release.Service // reconciliation releases overdue bookings
}

// assemble builds the services on c and wires each to the ones it names.
func assemble(c *core) *Engine {
	e := &Engine{core: c, Catalog: &Catalog{core: c}, Holds: &Holds{core: c}, Bookings: &Bookings{core: c},
		Payments: &Payments{core: c}, Notifications: &Notifications{core: c}, Upkeep: &Upkeep{core: c}}
	e.Catalog.bookings, e.Catalog.holds = e.Bookings, e.Holds
	e.Holds.bookings, e.Holds.catalog, e.Holds.payments, e.Holds.upkeep = e.Bookings, e.Catalog, e.Payments, e.Upkeep
	e.Bookings.catalog, e.Bookings.holds, e.Bookings.payments, e.Bookings.upkeep = e.Catalog, e.Holds, e.Payments, e.Upkeep
	e.Payments.bookings, e.Payments.catalog, e.Payments.holds, e.Payments.upkeep = e.Bookings, e.Catalog, e.Holds, e.Upkeep
	c.onFreed = append(c.onFreed, e.Holds.reactToFreed)
	e.Upkeep.bookings, e.Upkeep.catalog, e.Upkeep.payments = e.Bookings, e.Catalog, e.Payments
	e.assembleReleases()
	return e
}
