package engine

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotwheel/slotwheel/models"
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
	errs = append(errs, e.releaseOverdue(ctx, &rep))
	errs = append(errs, e.completeFinished(ctx))
	venues, err := e.venueIDs(ctx)
	errs = append(errs, err)
	for _, v := range venues {
		errs = append(errs, e.repairVenue(ctx, v, &rep))
	}
	errs = append(errs, e.requeueReleases(ctx, &rep))
	errs = append(errs, e.purgeIdempotency(ctx))
	metricDrift.WithLabelValues("overdue_released").Add(float64(rep.OverdueReleased))
	metricDrift.WithLabelValues("owners_added").Add(float64(rep.OwnersAdded))
	metricDrift.WithLabelValues("owners_removed").Add(float64(rep.OwnersRemoved))
	metricDrift.WithLabelValues("counter_drift").Add(float64(rep.CounterDrift))
	if err := errors.Join(errs...); err != nil {
		return rep, backendErr("reconcile", err)
	}
	if err := e.rdb.Set(ctx, e.keys.Alive(), e.clock.Now().UnixMilli(), 0).Err(); err != nil {
		return rep, backendErr("reconcile", err)
	}
	return rep, nil
}

func (e *Engine) releaseOverdue(ctx context.Context, rep *ReconcileReport) error {
	for {
		var rows []models.Booking
		if err := e.db.WithContext(ctx).Select("id, release_at").
			Where("status = ? AND release_at <= ?", models.StatusConfirmed, e.clock.Now()).
			Order("release_at").Limit(500).Find(&rows).Error; err != nil {
			return err
		}
		released := 0
		for _, r := range rows {
			out, err := e.Release(ctx, ReleaseRef{BookingID: r.ID, ReleaseAt: r.ReleaseAt})
			if err != nil {
				return err
			}
			if out == Released {
				released++
			}
		}
		rep.OverdueReleased += released
		if len(rows) < 500 || released == 0 {
			return nil
		}
	}
}

// completeFinished moves checked-in bookings along with the clock: ARRIVED becomes IN_PROGRESS at
// its start, and COMPLETED — giving its units back — once its physical window (clean-up included)
// is over. The wheel runs it every second; reconciliation too.
func (e *Engine) completeFinished(ctx context.Context) error {
	now := e.clock.Now()
	var rows []models.Booking
	if err := e.db.WithContext(ctx).Select("id").Where("status IN ? AND start <= ?",
		[]string{models.StatusArrived, models.StatusInProgress}, now).Order("start").Limit(500).Find(&rows).Error; err != nil {
		return err
	}
	for _, r := range rows {
		b, err := e.retry(ctx, r.ID, func(b *models.Booking) error {
			now := e.clock.Now()
			switch {
			case b.Status == models.StatusArrived && now.Before(b.OccupyEnd):
				return e.change(ctx, b, models.StatusInProgress, "system", "started", nil, nil)
			case (b.Status == models.StatusArrived || b.Status == models.StatusInProgress) && !now.Before(b.OccupyEnd):
				return e.change(ctx, b, models.StatusCompleted, "system", "ended", nil, nil)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !isOccupying(b.Status) {
			e.giveBack(ctx, b)
		}
	}
	return nil
}

func (e *Engine) repairVenue(ctx context.Context, v uint64, rep *ReconcileReport) error {
	k := e.keys
	var active []models.Booking
	if err := e.db.WithContext(ctx).Select("id, hold_id, quantity, slots").
		Where("venue_id = ? AND status IN ?", v, occupying).Find(&active).Error; err != nil {
		return err
	}
	isActive := make(map[string]bool, len(active))
	for _, b := range active {
		owner := BookingOwner(b.ID)
		isActive[owner] = true
		out, err := e.scripts.ensureOwner.Run(ctx, e.rdb, []string{k.Capacity(v), k.Used(v), k.Owners(v), k.Gone(v)},
			owner, HoldOwner(b.HoldID), b.Quantity, b.Slots, "0", "0").Text()
		if err != nil {
			return err
		}
		if out == "added" {
			rep.OwnersAdded++
		}
	}
	owners, err := e.rdb.HGetAll(ctx, k.Owners(v)).Result()
	if err != nil {
		return err
	}
	now := e.clock.Now()
	for owner := range owners {
		kind, id, _ := strings.Cut(owner, ":")
		switch {
		case kind == "b" && !isActive[owner]:
			bid, _ := strconv.ParseUint(id, 10, 64)
			var b models.Booking
			err := e.db.WithContext(ctx).Select("id, status, venue_id").First(&b, bid).Error
			if err == nil && isOccupying(b.Status) {
				continue // confirmed after the snapshot above
			}
			if err := e.dropOwner(ctx, v, owner, now); err != nil {
				return err
			}
			rep.OwnersRemoved++
		case kind == "h":
			if err := e.repairHold(ctx, v, id, now, rep); err != nil {
				return err
			}
		}
	}
	drift, err := e.scripts.recount.Run(ctx, e.rdb, []string{k.Used(v), k.Owners(v)}).Int()
	if err != nil {
		return err
	}
	rep.CounterDrift += drift
	return nil
}

func (e *Engine) dropOwner(ctx context.Context, v uint64, owner string, now time.Time) error {
	k := e.keys
	return e.scripts.giveBack.Run(ctx, e.rdb, []string{k.Owners(v), k.Used(v), k.Gone(v)},
		owner, now.UnixMilli(), (2 * keep).Milliseconds()).Err()
}

// repairHold settles what a process that died mid-hold or mid-confirm left behind.
func (e *Engine) repairHold(ctx context.Context, v uint64, id string, now time.Time, rep *ReconcileReport) error {
	k := e.keys
	m, err := e.rdb.HGetAll(ctx, k.Hold(v, id)).Result()
	if err != nil {
		return err
	}
	if m["status"] != HoldConfirming {
		if err := e.rdb.ZRem(ctx, k.Confirming(v), id).Err(); err != nil {
			return err
		}
	}
	switch m["status"] {
	case HoldHeld:
		deadline, _ := strconv.ParseInt(m["deadline_ms"], 10, 64)
		added, err := e.rdb.ZAddNX(ctx, k.Wheel(v), redis.Z{Score: float64(deadline), Member: id}).Result()
		if err != nil {
			return err
		}
		rep.HoldsRequeued += int(added)
		return nil
	case HoldConfirming:
		since, _ := strconv.ParseInt(m["confirming_ms"], 10, 64)
		if now.Sub(time.UnixMilli(since)) < e.opts.ConfirmStaleAfter {
			return nil // a confirm is running right now
		}
		r, err := e.decodeHold(ctx, m)
		if err != nil {
			return err
		}
		b, ok, err := e.bookingByHold(ctx, id)
		if err != nil {
			return err
		}
		if ok {
			e.settle(ctx, r, b.ID)
			rep.HoldsSettled++
		} else {
			e.unconfirm(ctx, r)
			rep.ConfirmingResumed++
		}
		return nil
	case HoldConfirmed:
		bid, _ := strconv.ParseUint(m["booking_id"], 10, 64)
		var b models.Booking
		if err := e.db.WithContext(ctx).Select("id, status").First(&b, bid).Error; err == nil && isOccupying(b.Status) {
			r, err := e.decodeHold(ctx, m)
			if err != nil {
				return err
			}
			e.settle(ctx, r, bid)
			rep.HoldsSettled++
			return nil
		}
	}
	// Expired, cancelled, unknown, or confirmed into a booking that no longer occupies.
	if err := e.dropOwner(ctx, v, HoldOwner(id), now); err != nil {
		return err
	}
	rep.OwnersRemoved++
	return nil
}

// requeueReleases puts every release due within the horizon back into the queue; the queue answers
// "already there" for those it has (task ids are derived from the booking).
func (e *Engine) requeueReleases(ctx context.Context, rep *ReconcileReport) error {
	if e.sched == nil {
		return nil
	}
	var lastID uint64
	for {
		var rows []models.Booking
		if err := e.db.WithContext(ctx).Select("id, release_at").
			Where("status = ? AND release_at <= ? AND id > ?", models.StatusConfirmed, e.clock.Now().Add(e.opts.ReleaseHorizon), lastID).
			Order("id").Limit(500).Find(&rows).Error; err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		refs := make([]ReleaseRef, 0, len(rows))
		for _, r := range rows {
			ref := ReleaseRef{BookingID: r.ID, ReleaseAt: r.ReleaseAt}
			if err := e.sched.ScheduleRelease(ctx, ref); err != nil {
				return err
			}
			refs = append(refs, ref)
			lastID = r.ID
		}
		rep.TasksScheduled += len(refs)
		if err := e.MarkReleaseQueued(ctx, refs); err != nil {
			return err
		}
	}
}
