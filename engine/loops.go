package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/loop"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
)

// LoopsConfig configures the engine's background loops. Zero values take the documented defaults.
type LoopsConfig struct {
	// ExpiryInterval is the hold wheel's tick; default 250ms. The wheel's marks are per second, so
	// it also runs just after each second begins: a second's holds expire then, and the tick is for
	// the lease, whose holder renews it and whose other instances look whether it is free, so that a
	// dead holder's venues expire within a second elsewhere. Availability does not depend on it (a
	// due hold stops counting at its deadline), only how soon counters, records and hold.expired
	// catch up.
	ExpiryInterval time.Duration
	// SweepInterval is the period of the watches of Redis (for data loss and for a failover); default
	// 1s.
	SweepInterval time.Duration
	// SQLSweepInterval is the period of the sweeps that poll SQL for what nothing in this process
	// announces — waitlist promotions a free elsewhere missed, checked-in bookings' progress, lost
	// tasks of deliveries and WeChat order closes — and the longest a reminder or a refund waits for
	// its loop (each also runs at the next time it knows of, or when this process writes one); default
	// 10s. Work falls due to them rarely: their polls are what an idle instance costs MySQL.
	SQLSweepInterval time.Duration
	// WheelSweepInterval is the period of the wheel's look at every venue, which catches what no
	// timer was marked for (a process that died between a hold and its mark, Redis data loss);
	// default 30s.
	WheelSweepInterval time.Duration
	// ReleaseInterval, when set, is the tick of the release loop in place of the release
	// service's (release.Config.Interval, which says what a tick does).
	ReleaseInterval time.Duration
	// RelayInterval is how often the outbox relay looks for new events; default 2s. It also runs at
	// once when this process commits events (every instance relays its own), so the interval only
	// matters for events whose process died before it relayed them.
	RelayInterval time.Duration
	// ExpiryBatch bounds the holds one script gives back per venue; default 500. A full batch is
	// followed at once by another.
	ExpiryBatch int
	// Lease, when set, gives each loop a lease (by its name) so that one instance runs it at a time:
	// instances share the work instead of repeating it, and another takes a loop over when the one
	// that runs it dies.
	Lease func(name string) loop.Lease
}

// Loops are the engine's background loops: each has a name, runs on its own interval, and can be
// driven one run at a time by tests (RunOnce).
type Loops struct {
	loops []runner
}

// runner is a background loop in engine/loop's shape: a *loop.Loop, or a service's loop that keeps
// state of its own around one (*release.Loop).
type runner interface {
	Name() string
	Start(ctx context.Context)
	Stop()
	RunOnce(ctx context.Context) error
}

// NewLoops builds the engine's background loops; Start runs them.
func (e *Engine) NewLoops(cfg LoopsConfig) *Loops {
	setDefault(&cfg.ExpiryInterval, 250*time.Millisecond)
	setDefault(&cfg.SweepInterval, time.Second)
	setDefault(&cfg.SQLSweepInterval, 10*time.Second)
	setDefault(&cfg.WheelSweepInterval, 30*time.Second)
	setDefault(&cfg.RelayInterval, 2*time.Second)
	if cfg.ExpiryBatch <= 0 {
		cfg.ExpiryBatch = 500
	}
	// leased says whether a loop runs on one instance at a time; leaseTTL is how long its holder may
	// be silent before another takes it over.
	mkLoop := func(name string, every, timeout, leaseTTL time.Duration, leased bool, run loop.Func) *loop.Loop {
		c := loop.Config{Name: name, Interval: every, Timeout: timeout, LeaseTTL: leaseTTL, Logger: e.log}
		if cfg.Lease != nil && leased {
			c.Lease = cfg.Lease(name)
		}
		return loop.New(c, run)
	}
	shared := func(name string, every time.Duration, run loop.Func) *loop.Loop {
		return mkLoop(name, every, max(10*every, 2*time.Second), 0, true, run)
	}
	// The relay runs on every instance, at its interval and at once whenever a write of this process
	// committed events: publishing is idempotent, and an instance's own events go out without waiting
	// for another's tick. A run waits for the first attempts of what it published (relayWait).
	relay := mkLoop("outbox_relay", cfg.RelayInterval, 30*time.Second, 0, false, func(ctx context.Context) error {
		for {
			n, err := e.RelayOutbox(ctx)
			if err != nil || n < 500 {
				return err
			}
		}
	})
	e.ss.OnEvents(relay.Kick)
	// Reminders go out at their remind_at: the loop runs then (it knows the next one after each run)
	// and when this process makes a booking to remind before its next run.
	var reminders *loop.Loop
	reminders = shared("reminders", cfg.SQLSweepInterval, func(ctx context.Context) error {
		next, err := e.sendReminders(ctx)
		if wait := next.Sub(e.clock.Now()); err == nil && !next.IsZero() && wait < cfg.SQLSweepInterval {
			reminders.KickAfter(max(wait, 0))
		}
		return err
	})
	// A refund a provider can take is sent within seconds: the loop runs when this process decides
	// one, at least every SQLSweepInterval for those another instance decided.
	refunds := shared("refunds", cfg.SQLSweepInterval, e.queueRefunds)
	e.ss.OnRefunds(refunds.Kick)
	// The release loop (release.Loop) keeps its own state: a new one starts as an instance that
	// takes the loop over does.
	var lease loop.Lease
	if cfg.Lease != nil {
		lease = cfg.Lease(release.LoopName)
	}
	releaseLoop := e.releases.NewLoop(release.LoopConfig{Interval: cfg.ReleaseInterval, Lease: lease})
	// This process's bookings due before the loops' next looks at SQL wake them (scheduleIfDue).
	e.timersSoon.Store(func(b *sqlstore.Booking) {
		releaseLoop.Due(b.ReleaseAt)
		now := e.clock.Now()
		if b.RemindAt != nil && b.RemindAt.Sub(now) < cfg.SQLSweepInterval {
			reminders.Kick()
		}
	})

	// The hold wheel runs just after each second begins (its marks are per second) and every
	// ExpiryInterval. Its lease outlasts two ticks and is short, so that a dead holder's venues
	// expire within a second elsewhere.
	var wheel *loop.Loop
	wheel = mkLoop("wheel", cfg.ExpiryInterval, 10*time.Second, max(2*cfg.ExpiryInterval, 500*time.Millisecond), true,
		func(ctx context.Context) error {
			defer wheel.KickAfter(untilNextSecond(time.Now()))
			return e.runWheel(ctx, cfg.ExpiryBatch)
		})

	return &Loops{loops: []runner{
		// Redis loss first (on every instance: each watches the queues it uses): the others need the
		// state it rebuilds.
		mkLoop("redis_loss", cfg.SweepInterval, 2*time.Second, 0, false, e.reconcileIfRedisLost),
		// So does a failover (on every instance: each watches the primaries it writes to).
		mkLoop("redis_failover", cfg.SweepInterval, failoverRepairTimeout, 0, false, e.watchPrimary),
		wheel,
		mkLoop("wheel_sweep", cfg.WheelSweepInterval, time.Minute, 0, true,
			func(ctx context.Context) error { return e.sweepWheel(ctx, cfg.ExpiryBatch) }),
		shared("waitlist", cfg.SQLSweepInterval, e.promoteWaiting),
		shared("freezes", cfg.SQLSweepInterval, e.sweepFreezes),
		shared("progress", cfg.SQLSweepInterval, e.completeFinished),
		reminders,
		releaseLoop,
		relay,
		shared("notify_prune", time.Hour, e.pruneNotifications),
		refunds,
		shared("deliveries_requeue", cfg.SQLSweepInterval, e.requeueDeliveries),
		shared("orders_sweep", cfg.SQLSweepInterval, e.sweepOrders),
	}}
}

// Start runs every loop until ctx ends or Stop.
func (l *Loops) Start(ctx context.Context) {
	for _, x := range l.loops {
		x.Start(ctx)
	}
}

// Stop ends every loop and waits for runs in progress.
func (l *Loops) Stop() {
	for _, x := range l.loops {
		x.Stop() // the release loop's waits for the runs it left at work
	}
}

// RunOnce runs every loop once, in order, and joins their errors (for tests and tools).
func (l *Loops) RunOnce(ctx context.Context) error {
	var errs []error
	for _, x := range l.loops {
		if err := x.RunOnce(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", x.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// Run runs the loop named name once (for tests).
func (l *Loops) Run(ctx context.Context, name string) error {
	for _, x := range l.loops {
		if x.Name() == name {
			return x.RunOnce(ctx)
		}
	}
	return fmt.Errorf("no loop %q", name)
}

// untilNextSecond is how long from now until just after the next whole second, when the wheel's
// marks for the second just ended are all due. The wheel's timer is the wall clock's, as every
// loop's interval is.
func untilNextSecond(now time.Time) time.Duration {
	return now.Truncate(time.Second).Add(time.Second + 2*time.Millisecond).Sub(now)
}

// wheelLookback bounds how far back a wheel that starts (or takes over from a dead instance) reads
// marks; older ones are the wheel sweep's.
const wheelLookback = 120

// wheel is the hold wheel's state on this instance: the last second whose marks it read.
type wheel struct {
	mu     sync.Mutex
	cursor int64
}

// runWheel is the wheel's tick: every venue marked for a second that has come is looked at once
// (its due holds expire, expired ones are announced, abandoned confirms and moves resolved), and the
// second's marks are dropped. Its cost follows what is due, not how many venues exist.
func (hs *Holds) runWheel(ctx context.Context, batch int) error {
	hs.wheel.mu.Lock()
	defer hs.wheel.mu.Unlock()
	now := hs.clock.Now()
	sec := now.Unix()
	from := hs.wheel.cursor + 1
	if hs.wheel.cursor == 0 || from < sec-wheelLookback {
		from = sec - wheelLookback
	}
	// Every second since the last run, read and dropped in one round trip each: a run after a pause
	// (a clock jump, a lease taken over) costs no more round trips than one on time.
	venues, err := hs.rs.DueBetween(ctx, from, sec)
	if err != nil {
		return err // these seconds are read again next run
	}
	var errs []error
	for _, v := range venues {
		if err := hs.tickVenue(ctx, v, batch); err != nil {
			errs = append(errs, fmt.Errorf("venue %d: %w", v, err))
			// Looked at again in a second, not lost with the dropped mark.
			errs = append(errs, hs.rs.MarkDue(ctx, v, now.Add(time.Second), now))
		}
	}
	// Buckets with no venue do not exist: an idle second costs the read alone.
	if len(venues) > 0 {
		if err := hs.rs.DropDueBetween(ctx, from, sec); err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	hs.wheel.cursor = sec
	return errors.Join(errs...)
}

// sweepWheel looks at every venue as the wheel does: the safety net for timers never marked.
func (hs *Holds) sweepWheel(ctx context.Context, batch int) error {
	venues, err := hs.cat.VenueList(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, v := range venues {
		if err := hs.tickVenue(ctx, v, batch); err != nil {
			errs = append(errs, fmt.Errorf("venue %d: %w", v, err))
		}
	}
	return errors.Join(errs...)
}

// tickVenue does a venue's due work: due holds give their units back (in batches), holds that
// expired are announced, and confirms and moves a dead process left behind are resolved.
func (hs *Holds) tickVenue(ctx context.Context, v uint64, batch int) error {
	var errs []error
	for {
		n, _, err := hs.rs.ExpireDue(ctx, v, hs.clock.Now(), batch)
		metricExpired.Add(float64(n))
		if err != nil {
			errs = append(errs, err)
			break
		}
		if n < batch {
			break
		}
	}
	errs = append(errs, hs.finishExpiredAt(ctx, v), hs.sweepConfirmingAt(ctx, v), hs.bookings.sweepMoves(ctx, v, hs.clock.Now()))
	return errors.Join(errs...)
}

func (hs *Holds) finishExpiredAt(ctx context.Context, v uint64) error {
	now := hs.clock.Now()
	ended, err := hs.rs.EndedHolds(ctx, v, now, 200)
	if err != nil || len(ended) == 0 {
		return err
	}
	var evs []sqlstore.Event
	var lapsed []uint64
	ids := make([]string, len(ended))
	for i := range ended {
		r := &ended[i]
		ids[i] = r.ID
		if r.UserID == "" || r.Effective(now) != booking.HoldExpired {
			continue
		}
		h := hs.viewHold(ctx, r)
		evs = append(evs, hs.events.holdEvent(booking.EventHoldExpired, h, now))
		w, ok, err := hs.ss.PromotedFor(ctx, r.ID)
		if err != nil {
			return err
		}
		if ok {
			entry := hs.toWaitlistEntry(ctx, w)
			entry.Status = booking.WaitLapsed
			ev := hs.events.waitlistEvent(booking.EventLapsed, entry, now)
			if err := hs.ss.SetWaitStatus(ctx, w.ID, booking.WaitPromoted, booking.WaitLapsed, "", now, &ev); err != nil && !sqlstore.IsStale(err) {
				return err
			}
			lapsed = append(lapsed, w.ResourceID)
		}
	}
	if err := hs.ss.InsertEvents(ctx, evs); err != nil {
		return err
	}
	if err := hs.rs.FinishExpired(ctx, v, ids, now); err != nil {
		return err
	}
	for i := range ended {
		hs.payments.closeOrderOf(ctx, ended[i].ID, ended[i].OrderNo)
	}
	hs.freed.announce(ctx, freedUnits{resources: lapsed})
	return nil
}

// sweepConfirmingAt resolves a venue's holds left CONFIRMING for longer than ConfirmStaleAfter: a
// process died between marking and settling, or a commit's outcome was lost. It is what
// reconciliation does for them, but within seconds (the confirm marked the venue's timer).
func (hs *Holds) sweepConfirmingAt(ctx context.Context, v uint64) error {
	now := hs.clock.Now()
	ids, err := hs.rs.StaleConfirming(ctx, v, now.Add(-hs.confirmStaleAfter), 100)
	if err != nil || len(ids) == 0 {
		return err
	}
	records, err := hs.rs.ReadHolds(ctx, v, ids)
	if err != nil {
		return err
	}
	var rep ReconcileReport
	var errs []error
	for _, id := range ids {
		r, ok := records[id]
		gone, err := hs.upkeep.repairHold(ctx, v, id, r, ok, now, &rep)
		if err == nil && gone {
			_, err = hs.rs.GiveBack(ctx, v, []redisstore.Freed{{Hold: id}}, now)
		}
		errs = append(errs, err)
	}
	countRepairs(rep)
	return errors.Join(errs...)
}

// reconcileIfRedisLost reconciles at once when Redis lost its data while the process runs: the
// release tasks went with it, and the loader does not offer bookings it already queued.
func (u *Upkeep) reconcileIfRedisLost(ctx context.Context) error {
	alive, err := u.rs.Alive(ctx, u.queueTags)
	if err != nil || alive {
		return err
	}
	u.log.Warn("redis lost its data; rebuilding from SQL now")
	metricRepairs.WithLabelValues(repairRedisLost).Inc()
	// A sweep's timeout is too short for a full reconciliation.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	rep, err := u.Reconcile(rctx)
	u.log.Info("rebuilt after redis data loss", "report", fmt.Sprintf("%+v", rep))
	return err
}

// sendReminders writes a booking.reminder event for every CONFIRMED booking whose reminder time has
// come, and answers the next remind_at (zero: none). Only CONFIRMED bookings are reminded: every
// other status cleared its reminder when it left CONFIRMED, and a booking that left it meanwhile is
// skipped here too.
func (n *Notifications) sendReminders(ctx context.Context) (time.Time, error) {
	now := n.clock.Now()
	due, err := n.ss.DueReminders(ctx, now, 500)
	if err != nil {
		return time.Time{}, err
	}
	if err := n.remind(ctx, due, now); err != nil {
		return time.Time{}, err
	}
	if len(due) == 500 {
		return now, nil // more are due: at once
	}
	return n.ss.NextReminder(ctx)
}

// remind sends the reminders of due bookings at now.
func (n *Notifications) remind(ctx context.Context, due []sqlstore.Booking, now time.Time) error {
	if len(due) == 0 {
		return nil
	}
	evs := make(map[uint64]sqlstore.Event, len(due))
	for i := range due {
		if _, err := n.cat.Venue(ctx, due[i].VenueID); err != nil {
			return err
		}
		evs[due[i].ID] = n.events.bookingEvent(booking.EventReminder, &due[i], "", now)
	}
	sent, err := n.ss.MarkReminded(ctx, due, evs)
	if err != nil {
		return err
	}
	metricReminders.Add(float64(sent))
	return nil
}

// The metrics of this file (engine.go says why they are package-level).
var (
	metricExpired = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_holds_expired_total", Help: "Holds whose units the wheel gave back at their deadline.",
	})
	metricReminders = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_reminders_total", Help: "Reminders sent (booking.reminder events written).",
	})
)
