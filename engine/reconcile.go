package engine

import (
	"context"
	"errors"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/internal/redisstore"
	"github.com/slotwheel/slotwheel/engine/internal/sqlstore"
)

// Reconcile makes Redis and the queue agree with SQL, which is the truth. It runs at start-up and
// hourly, and is safe to run at any time on any number of instances:
//   - inventory is kept generated horizon_days ahead;
//   - overdue CONFIRMED bookings are released (a lost or archived task changes nothing);
//   - finished ARRIVED bookings complete and give their units back;
//   - every occupying booking's units are counted once, units of holds and bookings that no longer
//     occupy come back, holds abandoned mid-confirm are settled or put back on the wheel, and slot
//     counters are recomputed from their owners;
//   - release tasks due within the horizon are (re)queued.
func (e *Engine) Reconcile(ctx context.Context) (ReconcileReport, error) {
	var rep ReconcileReport
	var errs []error
	n, err := e.extendInventory(ctx)
	rep.InventoryDays = n
	errs = append(errs, err)
	released, err := e.releaseOverdue(ctx)
	rep.OverdueReleased = released
	errs = append(errs, err)
	errs = append(errs, e.completeFinished(ctx))
	venues, err := e.cat.venueList(ctx)
	errs = append(errs, err)
	for _, v := range venues {
		errs = append(errs, e.repairVenue(ctx, v, &rep))
	}
	errs = append(errs, e.requeueReleases(ctx, &rep))
	for kind, n := range map[string]int{"overdue_released": rep.OverdueReleased, "owners_added": rep.OwnersAdded,
		"owners_removed": rep.OwnersRemoved, "counter_drift": rep.CounterDrift, "holds_requeued": rep.HoldsRequeued,
		"holds_settled": rep.HoldsSettled, "tasks_scheduled": rep.TasksScheduled, "confirming_resumed": rep.ConfirmingResumed} {
		metricRepairs.WithLabelValues(kind).Add(float64(n))
	}
	if err := errors.Join(errs...); err != nil {
		return rep, err
	}
	return rep, e.rs.MarkAlive(ctx, e.opts.QueueTags, e.clock.Now())
}

// releaseOverdue releases every CONFIRMED booking past its release_at, whatever happened to its task
// (archived after a long outage, lost with Redis, never created).
func (e *Engine) releaseOverdue(ctx context.Context) (int, error) {
	total := 0
	for {
		refs, err := e.ss.Overdue(ctx, e.clock.Now(), 500)
		if err != nil {
			return total, err
		}
		released := 0
		for _, r := range refs {
			out, err := e.Release(ctx, ReleaseRef{BookingID: r.BookingID, ReleaseAt: r.ReleaseAt})
			if err != nil {
				return total, err
			}
			if out == Released {
				released++
			}
		}
		total += released
		if len(refs) < 500 || released == 0 {
			return total, nil
		}
	}
}

// completeFinished moves checked-in bookings along with the clock: ARRIVED becomes IN_PROGRESS at
// its start, and COMPLETED — giving its units back — once its physical window is over.
func (e *Engine) completeFinished(ctx context.Context) error {
	ids, err := e.ss.Progressing(ctx, e.clock.Now(), 500)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, _, err := e.apply(ctx, id, func(b *sqlstore.Booking) (booking.Change, error) {
			return b.Progress(e.clock.Now())
		}); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return nil
}

func (e *Engine) repairVenue(ctx context.Context, v uint64, rep *ReconcileReport) error {
	active, err := e.ss.Occupying(ctx, v)
	if err != nil {
		return err
	}
	isActive := make(map[redisstore.Owner]bool, len(active))
	bs := make([]redisstore.BookingUnits, len(active))
	for i := range active {
		isActive[redisstore.BookingOwner(active[i].ID)] = true
		bs[i] = units(&active[i])
	}
	added, err := e.rs.EnsureCounted(ctx, v, bs)
	rep.OwnersAdded += added
	if err != nil {
		return err
	}
	owners, err := e.rs.Owners(ctx, v)
	if err != nil {
		return err
	}
	now := e.clock.Now()
	var stale []uint64
	for _, o := range owners {
		if id, ok := o.Booking(); ok && !isActive[o] {
			stale = append(stale, id)
		}
	}
	// A booking confirmed after the snapshot above occupies after all.
	statuses, err := e.ss.Statuses(ctx, stale)
	if err != nil {
		return err
	}
	var drop []redisstore.Owner
	for _, id := range stale {
		if !statuses[id].Occupies() {
			drop = append(drop, redisstore.BookingOwner(id))
		}
	}
	for _, o := range owners {
		if id, ok := o.Hold(); ok {
			gone, err := e.repairHold(ctx, v, id, now, rep)
			if err != nil {
				return err
			}
			if gone {
				drop = append(drop, o)
			}
		}
	}
	if _, err := e.rs.GiveBack(ctx, v, drop, now); err != nil {
		return err
	}
	rep.OwnersRemoved += len(drop)
	drift, err := e.rs.Recount(ctx, v)
	rep.CounterDrift += drift
	return err
}

// repairHold settles what a process that died mid-hold or mid-confirm left behind, and reports
// whether the hold's units must come back (expired, cancelled, unknown, or confirmed into a booking
// that no longer occupies).
func (e *Engine) repairHold(ctx context.Context, v uint64, id string, now time.Time, rep *ReconcileReport) (bool, error) {
	r, ok, err := e.rs.ReadHold(ctx, id)
	if err != nil {
		return false, err
	}
	if !ok {
		return true, e.rs.ForgetConfirming(ctx, v, id)
	}
	if r.Status != HoldConfirming {
		if err := e.rs.ForgetConfirming(ctx, v, id); err != nil {
			return false, err
		}
	}
	switch r.Effective(now) {
	case HoldHeld:
		added, err := e.rs.Requeue(ctx, &r)
		if added {
			rep.HoldsRequeued++
		}
		return false, err
	case HoldConfirming:
		if now.Sub(r.Since) < e.opts.ConfirmStaleAfter {
			return false, nil // a confirm is running right now
		}
		b, ok, err := e.ss.BookingByHold(ctx, id)
		if err != nil {
			return false, err
		}
		if ok {
			e.settle(ctx, &r, b.ID)
			rep.HoldsSettled++
		} else {
			e.unconfirm(ctx, &r)
			rep.ConfirmingResumed++
		}
		return false, nil
	}
	return true, nil
}

// requeueReleases puts every release due within the horizon back into the queue; the queue answers
// "already there" for those it has (task ids are derived from the booking).
func (e *Engine) requeueReleases(ctx context.Context, rep *ReconcileReport) error {
	if e.sched == nil {
		return nil
	}
	var lastID uint64
	for {
		rows, err := e.ss.Unreleased(ctx, e.clock.Now().Add(e.opts.ReleaseHorizon), lastID, 500)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		refs := make([]ReleaseRef, 0, len(rows))
		for _, r := range rows {
			ref := ReleaseRef{BookingID: r.BookingID, ReleaseAt: r.ReleaseAt}
			if err := e.sched.ScheduleRelease(ctx, ref); err != nil {
				return err
			}
			refs = append(refs, ref)
			lastID = r.BookingID
		}
		rep.TasksScheduled += len(refs)
		if err := e.MarkReleaseQueued(ctx, refs); err != nil {
			return err
		}
	}
}
