package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/internal/redisstore"
	"github.com/slotwheel/slotwheel/engine/internal/sqlstore"
	"github.com/slotwheel/slotwheel/engine/loop"
)

// LoopsConfig configures the engine's background loops. Zero values take the documented defaults.
type LoopsConfig struct {
	// ExpiryInterval is the hold wheel's tick; default 100ms. Availability does not depend on it (a
	// due hold stops counting at its deadline), only how soon counters and records catch up.
	ExpiryInterval time.Duration
	// SweepInterval is the period of the sweeps: holds a dead process left CONFIRMING, expired holds
	// to announce, waitlist promotion, checked-in bookings' progress, reminders, and Redis-loss
	// detection; default 1s.
	SweepInterval time.Duration
	// OverdueInterval is the period of the overdue release sweep, which releases every CONFIRMED
	// booking past its release_at whatever happened to its task; default 2s.
	OverdueInterval time.Duration
	// RelayInterval is how often the outbox relay looks for new events; default 250ms. It also runs at
	// once when this process commits events, so the interval matters for other instances' events.
	RelayInterval time.Duration
	// ExpiryBatch bounds the holds one script gives back per venue; default 500. A full batch is
	// followed at once by another.
	ExpiryBatch int
	// Lease, when set, gives each loop a lease (by its name) so that one instance runs it at a time.
	Lease func(name string) loop.Lease
}

// Loops are the engine's background loops: each has a name, runs on its own interval, and can be
// driven one run at a time by tests (RunOnce).
type Loops struct {
	loops []*loop.Loop
}

// NewLoops builds the engine's background loops; Start runs them.
func (e *Engine) NewLoops(cfg LoopsConfig) *Loops {
	setDefault(&cfg.ExpiryInterval, 100*time.Millisecond)
	setDefault(&cfg.SweepInterval, time.Second)
	setDefault(&cfg.OverdueInterval, 2*time.Second)
	setDefault(&cfg.RelayInterval, 250*time.Millisecond)
	if cfg.ExpiryBatch <= 0 {
		cfg.ExpiryBatch = 500
	}
	mkTimeout := func(name string, every, timeout time.Duration, run loop.Func) *loop.Loop {
		c := loop.Config{Name: name, Interval: every, Timeout: timeout, Logger: e.log}
		if cfg.Lease != nil {
			c.Lease = cfg.Lease(name)
		}
		return loop.New(c, run)
	}
	mk := func(name string, every time.Duration, run loop.Func) *loop.Loop {
		return mkTimeout(name, every, max(10*every, 2*time.Second), run)
	}
	// The relay runs at its interval, and at once whenever a write committed events.
	// A run waits for the first attempts of what it published (relayWait), so it gets more time.
	relay := mkTimeout("outbox_relay", cfg.RelayInterval, 30*time.Second, func(ctx context.Context) error {
		for {
			n, err := e.RelayOutbox(ctx)
			if err != nil || n < 500 {
				return err
			}
		}
	})
	e.ss.OnEvents(relay.Kick)
	return &Loops{loops: []*loop.Loop{
		// Redis loss first: the others need the state it rebuilds.
		mk("redis_loss", cfg.SweepInterval, e.reconcileIfRedisLost),
		mk("hold_expiry", cfg.ExpiryInterval, func(ctx context.Context) error { return e.expireHolds(ctx, cfg.ExpiryBatch) }),
		mk("expired_holds", cfg.SweepInterval, e.finishExpiredHolds),
		mk("abandoned_confirms", cfg.SweepInterval, e.sweepConfirming),
		mk("waitlist", cfg.SweepInterval, e.promoteWaiting),
		mk("progress", cfg.SweepInterval, e.completeFinished),
		mk("reminders", cfg.SweepInterval, e.sendReminders),
		mk("overdue_release", cfg.OverdueInterval, func(ctx context.Context) error { _, err := e.ReleaseDue(ctx, 0); return err }),
		relay,
		mk("notify_prune", time.Hour, e.pruneNotifications),
		mk("refunds", 2*time.Second, e.queueRefunds),
		mk("deliveries_requeue", 5*time.Second, e.requeueDeliveries),
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
		x.Stop()
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

// expireHolds gives back the units of every venue's due holds, in batches.
func (e *Engine) expireHolds(ctx context.Context, batch int) error {
	venues, err := e.cat.venueList(ctx)
	if err != nil {
		return err
	}
	var errs []error
	total := 0
	for _, v := range venues {
		for {
			n, _, err := e.rs.ExpireDue(ctx, v, e.clock.Now(), batch)
			total += n
			if err != nil {
				errs = append(errs, err)
				break
			}
			if n < batch {
				break
			}
		}
	}
	metricExpired.Add(float64(total))
	return errors.Join(errs...)
}

// finishExpiredHolds announces the holds that expired unpaid (hold.expired, and waitlist.lapsed for
// a promoted waiter's hold, whose units then pass to the next waiter) and writes their records
// EXPIRED. The events are written first: if SQL is away the holds stay to be finished next time.
func (e *Engine) finishExpiredHolds(ctx context.Context) error {
	venues, err := e.cat.venueList(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, v := range venues {
		errs = append(errs, e.finishExpiredAt(ctx, v))
	}
	return errors.Join(errs...)
}

func (e *Engine) finishExpiredAt(ctx context.Context, v uint64) error {
	now := e.clock.Now()
	ended, err := e.rs.EndedHolds(ctx, v, now, 200)
	if err != nil || len(ended) == 0 {
		return err
	}
	var evs []sqlstore.Event
	var lapsed []uint64
	ids := make([]string, len(ended))
	for i := range ended {
		r := &ended[i]
		ids[i] = r.ID
		if r.UserID == "" || r.Effective(now) != HoldExpired {
			continue
		}
		h := e.viewHold(ctx, r)
		evs = append(evs, e.holdEvent(booking.EventHoldExpired, h, now))
		w, ok, err := e.ss.PromotedFor(ctx, r.ID)
		if err != nil {
			return err
		}
		if ok {
			entry := e.toWaitlistEntry(ctx, w)
			entry.Status = booking.WaitLapsed
			ev := e.waitlistEvent(booking.EventLapsed, entry, now)
			if err := e.ss.SetWaitStatus(ctx, w.ID, booking.WaitPromoted, booking.WaitLapsed, "", now, &ev); err != nil && !sqlstore.IsStale(err) {
				return err
			}
			lapsed = append(lapsed, w.ResourceID)
		}
	}
	if err := e.ss.InsertEvents(ctx, evs); err != nil {
		return err
	}
	if err := e.rs.FinishExpired(ctx, v, ids, now); err != nil {
		return err
	}
	for i := range ended {
		e.closeOrderOf(ctx, ended[i].ID, ended[i].OrderNo)
	}
	for _, rid := range lapsed {
		e.promoteAfterFree(ctx, rid)
	}
	return nil
}

// sweepConfirming resolves holds left CONFIRMING, and booking moves left reserved, for longer than
// ConfirmStaleAfter: a process died between the Redis step and the SQL one, or a commit's outcome was
// lost. It is what reconciliation does for them, but within seconds.
func (e *Engine) sweepConfirming(ctx context.Context) error {
	venues, err := e.cat.venueList(ctx)
	if err != nil {
		return err
	}
	now := e.clock.Now()
	var rep ReconcileReport
	var errs []error
	for _, v := range venues {
		if err := e.sweepMoves(ctx, v, now); err != nil {
			errs = append(errs, err)
		}
		ids, err := e.rs.StaleConfirming(ctx, v, now.Add(-e.opts.ConfirmStaleAfter), 100)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		records, err := e.rs.ReadHolds(ctx, v, ids)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, id := range ids {
			r, ok := records[id]
			gone, err := e.repairHold(ctx, v, id, r, ok, now, &rep)
			if err == nil && gone {
				_, err = e.rs.GiveBack(ctx, v, []redisstore.Freed{{Owner: redisstore.HoldOwner(id)}}, now)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	metricRepairs.WithLabelValues("confirming_resumed").Add(float64(rep.ConfirmingResumed))
	metricRepairs.WithLabelValues("holds_settled").Add(float64(rep.HoldsSettled))
	return errors.Join(errs...)
}

// reconcileIfRedisLost reconciles at once when Redis lost its data while the process runs: the
// release tasks went with it, and the loader does not offer bookings it already queued.
func (e *Engine) reconcileIfRedisLost(ctx context.Context) error {
	alive, err := e.rs.Alive(ctx, e.opts.QueueTags)
	if err != nil || alive {
		return err
	}
	e.log.Warn("redis lost its data; rebuilding from SQL now")
	metricRepairs.WithLabelValues("redis_lost").Inc()
	// A sweep's timeout is too short for a full reconciliation.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	rep, err := e.Reconcile(rctx)
	e.log.Info("rebuilt after redis data loss", "report", fmt.Sprintf("%+v", rep))
	return err
}

// sendReminders writes a booking.reminder event for every CONFIRMED booking whose reminder time has
// come. Only CONFIRMED bookings are reminded: every other status cleared its reminder when it left
// CONFIRMED, and a booking that left it meanwhile is skipped here too.
func (e *Engine) sendReminders(ctx context.Context) error {
	now := e.clock.Now()
	due, err := e.ss.DueReminders(ctx, now, 500)
	if err != nil || len(due) == 0 {
		return err
	}
	evs := make(map[uint64]sqlstore.Event, len(due))
	for i := range due {
		if _, err := e.cat.venue(ctx, due[i].VenueID); err != nil {
			return err
		}
		evs[due[i].ID] = e.bookingEvent(booking.EventReminder, &due[i], "", now)
	}
	sent, err := e.ss.MarkReminded(ctx, due, evs)
	if err != nil {
		return err
	}
	metricReminders.Add(float64(sent))
	return nil
}
