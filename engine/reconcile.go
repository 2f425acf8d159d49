package engine

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/catalog"
	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/engine/loop"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/engine/wechatpay"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
)

// Upkeep owns reconciliation of Redis against SQL, repairs after a Redis failover or data loss, and
// the statistics collector (reconcile.go, failover.go, stats.go).
type Upkeep struct {
	rs    *redisstore.Store
	ss    *sqlstore.Store
	cat   *catalog.Cache
	sched release.Scheduler
	clock clock.Clock
	log   *slog.Logger
	lease func(name string) loop.Lease // Engine.Lease: one instance at a time runs name

	confirmStaleAfter time.Duration     // Options.ConfirmStaleAfter
	releaseHorizon    time.Duration     // Options.ReleaseHorizon
	wechatPay         *wechatpay.Client // Options.WechatPay
	// queueTags are the release queues whose loss is watched (Options.QueueTags, or the scheduler's).
	queueTags []string

	// primary is the identity of the Redis primaries last seen (watchPrimary).
	primary atomic.Value

	// What upkeep uses of the other services.
	bookings interface {
		apply(ctx context.Context, id uint64, decide func(b *sqlstore.Booking) (booking.Change, error)) (sqlstore.Booking, booking.Change, error)
		sweepMoves(ctx context.Context, venueID uint64, now time.Time) error
		MarkReleaseQueued(ctx context.Context, refs []release.Ref) error
	}
	catalog interface {
		extendInventory(ctx context.Context) (int, error)
	}
	payments interface {
		settle(ctx context.Context, r *redisstore.HoldRecord, b *sqlstore.Booking)
		unconfirm(ctx context.Context, r *redisstore.HoldRecord)
		refuseOverfull(ctx context.Context, venueID uint64, fields []string) (int, error)
		checkLedger(ctx context.Context, rep *ReconcileReport) error
		closeOrderOf(ctx context.Context, holdID, orderNo string)
	}
	releases *release.Service // reconciliation releases overdue bookings
}

// Reconcile makes Redis and the queue agree with SQL, which is the truth. It runs at start-up, hourly
// and when a Redis failover is noticed, and is safe to run at any time on any number of instances:
//   - inventory is kept generated horizon_days ahead;
//   - overdue CONFIRMED bookings are released (a lost or archived task changes nothing);
//   - finished ARRIVED bookings complete and give their units back;
//   - every occupying booking's units are counted once, units of holds and bookings that no longer
//     occupy come back, holds abandoned mid-confirm are settled or put back on the wheel, and slot
//     counters are recomputed from their owners, and live holds on slots that count more units than
//     they have (Redis lost writes) end;
//   - release tasks due within the horizon are (re)queued;
//   - the capacity ledger is checked against the bookings: a drifted count is repaired, and a slot
//     whose bookings take more units than it has is reported (logged with the bookings, exported,
//     alerted on), never hidden.
func (u *Upkeep) Reconcile(ctx context.Context) (ReconcileReport, error) {
	rep, err := u.RepairCounters(ctx)
	if err != nil {
		return rep, err
	}
	return u.ReconcileRest(ctx, rep)
}

// RepairCounters is the part of reconciliation a start waits for: every occupying booking's units
// counted once, units of what no longer occupies given back, abandoned confirms resolved, counters
// recomputed — then Redis is marked as holding what SQL says, and the instance may serve.
func (u *Upkeep) RepairCounters(ctx context.Context) (ReconcileReport, error) {
	var rep ReconcileReport
	// The markers name when the repair began: what it repaired is what happened before then.
	began := u.clock.Now()
	venues, err := u.cat.VenueList(ctx)
	if err != nil {
		return rep, err
	}
	var errs []error
	for _, v := range venues {
		errs = append(errs, u.repairVenue(ctx, v, &rep))
	}
	if err := errors.Join(errs...); err != nil {
		return rep, err
	}
	return rep, u.rs.MarkAlive(ctx, u.queueTags, began)
}

// startupLease is how long the instance doing the start-up repair may be silent before another
// starting instance takes the repair over; the holder renews it a few times within.
const startupLease = 15 * time.Second

// StartupOutcome says what ReconcileAtStart did.
type StartupOutcome struct {
	// Ran is true when this instance repaired the counters; false when another instance's repair,
	// begun after this instance started, already covers everything this one would repair.
	Ran    bool
	Report ReconcileReport
}

// ReconcileAtStart is the start-up part of reconciliation (RepairCounters), done once however many
// instances start together: an instance takes a lease, and repairs unless the markers the last
// repair left (Redis' alive markers) show that a repair began after startedAt, the time this
// process started — that repair saw all this instance would (the leftovers of a process it
// replaces included). The others wait for the lease meanwhile, so no instance serves before Redis
// holds what SQL says; a holder that dies passes the repair to the next within startupLease. The
// caller runs the rest of reconciliation (ReconcileRest) only when Ran.
func (u *Upkeep) ReconcileAtStart(ctx context.Context, startedAt time.Time) (StartupOutcome, error) {
	if err := u.cat.Warm(ctx); err != nil {
		u.log.Warn("start: the catalog's shared entries did not load; the first holds load them", "err", err)
	}
	lease := u.lease("startup_reconcile")
	// covered: a repair that began after this process started already saw all it would repair.
	covered := func() (bool, error) {
		since, alive, err := u.rs.AliveSince(ctx, u.queueTags)
		return alive && !since.Before(startedAt), err
	}
	for {
		if done, err := covered(); err != nil || done {
			return StartupOutcome{}, err
		}
		held, err := lease.Hold(ctx, startupLease)
		if err != nil {
			return StartupOutcome{}, err
		}
		if held {
			break
		}
		// Another instance is repairing: look again soon (a lease has no event to wait on).
		if err := loop.Sleep(ctx, 200*time.Millisecond); err != nil {
			return StartupOutcome{}, err
		}
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = lease.Release(rctx)
		cancel()
	}()
	// The repair that held the lease before this one may have finished since the markers were read.
	if done, err := covered(); err != nil || done {
		return StartupOutcome{}, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(startupLease / 3)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
				if held, err := lease.Hold(rctx, startupLease); err == nil && !held {
					u.log.Warn("start-up reconciliation lost its lease; another instance may repeat it")
				}
			}
		}
	}()
	rep, err := u.RepairCounters(rctx)
	cancel()
	<-renewed
	return StartupOutcome{Ran: true, Report: rep}, err
}

// ReconcileRest is the part of reconciliation that may run while the instance serves: inventory
// kept generated, overdue bookings released, checked-in bookings moved along, release tasks
// (re)queued. It adds to rep and counts the repairs in metrics.
func (u *Upkeep) ReconcileRest(ctx context.Context, rep ReconcileReport) (ReconcileReport, error) {
	var errs []error
	n, err := u.catalog.extendInventory(ctx)
	rep.InventoryDays = n
	errs = append(errs, err)
	released, err := u.releases.ReleaseDue(ctx, 0)
	rep.OverdueReleased = released
	errs = append(errs, err)
	errs = append(errs, u.completeFinished(ctx))
	errs = append(errs, u.requeueReleases(ctx, &rep))
	errs = append(errs, u.payments.checkLedger(ctx, &rep))
	countRepairs(rep)
	return rep, errors.Join(errs...)
}

// completeFinished moves checked-in bookings along with the clock: ARRIVED becomes IN_PROGRESS at
// its start, and COMPLETED — giving its units back — once its physical window is over.
func (u *Upkeep) completeFinished(ctx context.Context) error {
	ids, err := u.ss.Progressing(ctx, u.clock.Now(), 500)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, _, err := u.bookings.apply(ctx, id, func(b *sqlstore.Booking) (booking.Change, error) {
			return b.Progress(u.clock.Now())
		}); err != nil && !errors.Is(err, booking.ErrNotFound) {
			return err
		}
	}
	return nil
}

func (u *Upkeep) repairVenue(ctx context.Context, v uint64, rep *ReconcileReport) error {
	// Moves left behind first: a move's own units are neither a hold's nor a booking's.
	if err := u.bookings.sweepMoves(ctx, v, u.clock.Now()); err != nil {
		return err
	}
	active, err := u.ss.Occupying(ctx, v)
	if err != nil {
		return err
	}
	isActive := make(map[redisstore.Owner]bool, len(active))
	bs := make([]redisstore.BookingUnits, len(active))
	for i := range active {
		isActive[redisstore.BookingOwner(active[i].ID)] = true
		bs[i] = units(&active[i])
	}
	added, err := u.rs.EnsureCounted(ctx, v, bs)
	rep.OwnersAdded += added
	if err != nil {
		return err
	}
	owners, err := u.rs.Owners(ctx, v)
	if err != nil {
		return err
	}
	now := u.clock.Now()
	var stale []uint64
	for _, o := range owners {
		if id, ok := o.Booking(); ok && !isActive[o] {
			stale = append(stale, id)
		}
	}
	// A booking confirmed after the snapshot above occupies after all; one that stopped occupying
	// gives back only what its version (not a later change) held.
	states, err := u.ss.States(ctx, stale)
	if err != nil {
		return err
	}
	var drop []redisstore.Freed
	for _, id := range stale {
		st, ok := states[id]
		if !ok || !st.Status.Occupies() {
			drop = append(drop, redisstore.Freed{Booking: id, Version: st.Version})
		}
	}
	var holds []string
	for _, o := range owners {
		if id, ok := o.Hold(); ok {
			holds = append(holds, id)
		}
	}
	// A live hold whose booking committed was confirmed while Redis was replicating, and a failover
	// rolled the confirm back (the counting above has already handed its units to the booking): it
	// is settled into its booking, so that it neither expires — announcing an expiry of what was
	// booked — nor counts twice.
	live, err := u.rs.LiveHolds(ctx, v)
	if err != nil {
		return err
	}
	records, err := u.rs.ReadHolds(ctx, v, append(slices.Clone(holds), live...))
	if err != nil {
		return err
	}
	var unsettled []string
	for id, r := range records {
		if r.Status == booking.HoldHeld {
			unsettled = append(unsettled, id)
		}
	}
	booked, err := u.ss.BookingsByHolds(ctx, unsettled)
	if err != nil {
		return err
	}
	for id, b := range booked {
		r := records[id]
		u.payments.settle(ctx, &r, &b)
		rep.HoldsSettled++
	}
	for _, id := range holds {
		if _, settled := booked[id]; settled {
			continue
		}
		r, ok := records[id]
		gone, err := u.repairHold(ctx, v, id, r, ok, now, rep)
		if err != nil {
			return err
		}
		if gone {
			drop = append(drop, redisstore.Freed{Hold: id})
		}
	}
	if _, err := u.rs.GiveBack(ctx, v, drop, now); err != nil {
		return err
	}
	rep.OwnersRemoved += len(drop)
	drift, overfull, err := u.rs.Recount(ctx, v)
	rep.CounterDrift += drift
	if err != nil {
		return err
	}
	// Holds let through on units that bookings own (Redis lost writes) cannot become bookings:
	// they end now rather than at their payment.
	refused, err := u.payments.refuseOverfull(ctx, v, overfull)
	rep.HoldsRefused += refused
	return err
}

// repairHold settles what a process that died mid-hold or mid-confirm left behind, and reports
// whether the hold's units must come back (expired, cancelled, unknown, or confirmed into a booking
// that no longer occupies).
func (u *Upkeep) repairHold(ctx context.Context, v uint64, id string, r redisstore.HoldRecord, ok bool, now time.Time, rep *ReconcileReport) (bool, error) {
	if !ok {
		return true, u.rs.ForgetConfirming(ctx, v, id)
	}
	if r.Status != booking.HoldConfirming {
		if err := u.rs.ForgetConfirming(ctx, v, id); err != nil {
			return false, err
		}
	}
	switch r.Effective(now) {
	case booking.HoldHeld:
		added, err := u.rs.Requeue(ctx, &r, now)
		if added {
			rep.HoldsRequeued++
		}
		return false, err
	case booking.HoldConfirming:
		if now.Sub(r.Since) < u.confirmStaleAfter {
			return false, nil // a confirm is running right now
		}
		b, ok, err := u.ss.BookingByHold(ctx, id)
		if err != nil {
			return false, err
		}
		if ok {
			u.payments.settle(ctx, &r, &b)
			rep.HoldsSettled++
		} else {
			u.payments.unconfirm(ctx, &r)
			rep.ConfirmingResumed++
		}
		return false, nil
	}
	return true, nil
}

// requeueReleases puts every release due within the horizon back into the queue; the queue answers
// "already there" for those it has (task ids are derived from the booking), and only the tasks it
// did not have count as TasksScheduled.
func (u *Upkeep) requeueReleases(ctx context.Context, rep *ReconcileReport) error {
	if u.sched == nil {
		return nil
	}
	var lastID uint64
	for {
		rows, err := u.ss.Unreleased(ctx, u.clock.Now().Add(u.releaseHorizon), lastID, 500)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		refs := make([]release.Ref, 0, len(rows))
		for _, r := range rows {
			ref := release.Ref{BookingID: r.BookingID, ReleaseAt: r.ReleaseAt}
			added, err := u.sched.ScheduleRelease(ctx, ref)
			if err != nil {
				return err
			}
			// Only a task the queue did not have is a repair; one already there is the steady state.
			if added {
				rep.TasksScheduled++
			}
			refs = append(refs, ref)
			lastID = r.BookingID
		}
		if err := u.bookings.MarkReleaseQueued(ctx, refs); err != nil {
			return err
		}
	}
}
