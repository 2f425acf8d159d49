package engine

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
	"github.com/slotwheel/slotwheel/models"
)

// WaitlistRequest asks to wait for units of a resource window.
type WaitlistRequest struct {
	UserID     string
	ResourceID uint64
	Start      time.Time
	End        time.Time
	Quantity   int
}

// JoinWaitlist puts a user in line for a resource window, once (ErrAlreadyWaiting for a second
// time). The window is checked like a hold's (on the grid, not past, within the horizon). If its
// units are free right now the entry is promoted at once, so the answer already carries the hold to
// pay.
func (e *Holds) JoinWaitlist(ctx context.Context, req WaitlistRequest) (booking.WaitlistEntry, error) {
	if req.UserID == "" {
		return booking.WaitlistEntry{}, booking.ErrForbidden
	}
	var err error
	if req.Quantity, err = booking.Quantity(req.Quantity); err != nil {
		return booking.WaitlistEntry{}, err
	}
	if req.ResourceID == 0 {
		return booking.WaitlistEntry{}, booking.Invalid("missing_resource_id", "resource_id is required").WithField("resource_id")
	}
	if req.Start.IsZero() || req.End.IsZero() {
		return booking.WaitlistEntry{}, booking.Invalid("missing_start", "start and end are required").WithField("start")
	}
	ri, err := e.cat.resource(ctx, req.ResourceID)
	if err != nil {
		return booking.WaitlistEntry{}, unknown(err, "unknown_resource", "resource %d does not exist", req.ResourceID)
	}
	now := e.clock.Now()
	p, err := offer(ri, nil).Place(req.Start, req.End, req.Quantity, now)
	if err != nil {
		return booking.WaitlistEntry{}, err
	}
	id, err := e.ss.JoinWaitlist(ctx, sqlstore.NewWait{UserID: req.UserID, VenueID: ri.res.VenueID, ResourceID: req.ResourceID,
		Start: p.Start, End: p.End, Quantity: req.Quantity}, now)
	if err != nil {
		if errors.Is(err, sqlstore.ErrAlreadyWaiting) {
			return booking.WaitlistEntry{}, booking.ErrAlreadyWaiting
		}
		return booking.WaitlistEntry{}, err
	}
	e.promoteAfterFree(ctx, req.ResourceID)
	return e.waitlistEntry(ctx, id)
}

// LeaveWaitlist takes a waiting entry out of line. Owner or admin; a promoted entry keeps its hold
// (give that up with CancelHold).
func (e *Holds) LeaveWaitlist(ctx context.Context, a booking.Actor, id uint64) (booking.WaitlistEntry, error) {
	row, err := e.ss.WaitlistEntry(ctx, id)
	if err != nil {
		return booking.WaitlistEntry{}, err
	}
	if !a.MayChange(row.UserID) {
		return booking.WaitlistEntry{}, booking.ErrNotFound
	}
	if booking.WaitStatus(row.Status) == booking.WaitWaiting {
		err := e.ss.SetWaitStatus(ctx, id, booking.WaitWaiting, booking.WaitCancelled, "", e.clock.Now(), nil)
		if err != nil && !sqlstore.IsStale(err) {
			return booking.WaitlistEntry{}, err
		}
	}
	return e.waitlistEntry(ctx, id)
}

// ListWaitlist lists the actor's entries, newest first.
func (e *Holds) ListWaitlist(ctx context.Context, a booking.Actor) ([]booking.WaitlistEntry, error) {
	rows, err := e.ss.UserWaitlist(ctx, a.UserID, 100)
	if err != nil {
		return nil, err
	}
	out := make([]booking.WaitlistEntry, 0, len(rows))
	for _, r := range rows {
		out = append(out, e.toWaitlistEntry(ctx, r))
	}
	return out, nil
}

func (e *Holds) waitlistEntry(ctx context.Context, id uint64) (booking.WaitlistEntry, error) {
	row, err := e.ss.WaitlistEntry(ctx, id)
	if err != nil {
		return booking.WaitlistEntry{}, err
	}
	return e.toWaitlistEntry(ctx, row), nil
}

func (e *Holds) toWaitlistEntry(ctx context.Context, r models.WaitlistEntry) booking.WaitlistEntry {
	out := booking.WaitlistEntry{ID: r.ID, UserID: r.UserID, VenueID: r.VenueID, ResourceID: r.ResourceID, Status: booking.WaitStatus(r.Status),
		Start: r.Start.UTC(), End: r.End.UTC(), Quantity: r.Quantity, HoldID: r.HoldID, CreatedAt: r.CreatedAt.UTC()}
	if vi, err := e.cat.venue(ctx, r.VenueID); err == nil {
		out.Start, out.End, out.CreatedAt = out.Start.In(vi.loc), out.End.In(vi.loc), out.CreatedAt.In(vi.loc)
	}
	return out
}

// promoteAfterFree offers freed units to the resource's first waiters at once. A failure is only
// logged: the waitlist loop promotes every second anyway.
func (e *Holds) promoteAfterFree(ctx context.Context, resourceID uint64) {
	if err := e.promote(ctx, resourceID); err != nil {
		e.log.Warn("waitlist promotion failed; the loop retries", "resource_id", resourceID, "err", err)
	}
}

// promote gives holds to the waiters of a resource, first come first served, while units are free.
// A waiter whose window is full is skipped (a later, smaller window may fit); one whose window has
// ended expires. Racing instances cannot promote an entry twice: WAITING → PROMOTED is conditional,
// and a hold that lost that race is given back.
func (e *Holds) promote(ctx context.Context, resourceID uint64) error {
	rows, err := e.ss.Waiting(ctx, resourceID, 200)
	if err != nil {
		return err
	}
	for _, r := range rows {
		now := e.clock.Now()
		h, err := e.Hold(ctx, HoldRequest{UserID: r.UserID, ResourceID: r.ResourceID, Start: r.Start, End: r.End, Quantity: r.Quantity})
		switch {
		case errors.Is(err, booking.ErrSlotFull), errors.Is(err, booking.ErrTooManyHolds):
			continue
		case errors.Is(err, booking.ErrSlotPast), errors.Is(err, booking.ErrSlotClosed), errors.Is(err, booking.ErrOffGrid), errors.Is(err, booking.ErrResourceInactive):
			if err := e.ss.SetWaitStatus(ctx, r.ID, booking.WaitWaiting, booking.WaitExpired, "", now, nil); err != nil && !sqlstore.IsStale(err) {
				return err
			}
			continue
		case err != nil:
			if _, domain := booking.AsError(err); domain {
				continue // e.g. too_far after a horizon change: it may fit later; others still get their turn
			}
			return err
		}
		entry := e.toWaitlistEntry(ctx, r)
		entry.Status, entry.HoldID = booking.WaitPromoted, h.ID
		ev := e.waitlistEvent(booking.EventPromoted, entry, now)
		if err := e.ss.SetWaitStatus(ctx, r.ID, booking.WaitWaiting, booking.WaitPromoted, h.ID, now, &ev); err != nil {
			if _, cerr := e.CancelHold(ctx, booking.System, h.ID); cerr != nil {
				e.log.Warn("give back an unneeded waitlist hold", "hold_id", h.ID, "err", cerr)
			}
			if sqlstore.IsStale(err) {
				continue
			}
			return err
		}
		metricPromotions.Inc()
		e.log.Info("waitlist promoted", "entry", r.ID, "user", r.UserID, "hold_id", h.ID)
	}
	return nil
}

// promoteWaiting runs promotion for every resource that has waiters (the waitlist loop calls it every
// second, which covers units freed by expired holds; releases and cancels promote at once).
func (e *Holds) promoteWaiting(ctx context.Context) error {
	ids, err := e.ss.ResourcesWithWaiters(ctx, 500)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := e.promote(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// The metrics of this file (engine.go says why they are package-level).
var (
	metricPromotions = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_waitlist_promotions_total", Help: "Waiters promoted to a hold.",
	})
)
