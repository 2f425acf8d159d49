package engine

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/catalog"
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
func (hs *Holds) JoinWaitlist(ctx context.Context, req WaitlistRequest) (booking.WaitlistEntry, error) {
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
	ri, err := hs.cat.Resource(ctx, req.ResourceID)
	if err != nil {
		return booking.WaitlistEntry{}, booking.Unknown(err, "unknown_resource", "resource %d does not exist", req.ResourceID)
	}
	now := hs.clock.Now()
	p, err := catalog.Offer(ri, nil).Place(req.Start, req.End, req.Quantity, now)
	if err != nil {
		return booking.WaitlistEntry{}, err
	}
	id, err := hs.ss.JoinWaitlist(ctx, sqlstore.NewWait{UserID: req.UserID, VenueID: ri.Resource.VenueID, ResourceID: req.ResourceID,
		Start: p.Start, End: p.End, Quantity: req.Quantity}, now)
	if err != nil {
		if errors.Is(err, sqlstore.ErrAlreadyWaiting) {
			return booking.WaitlistEntry{}, booking.ErrAlreadyWaiting
		}
		return booking.WaitlistEntry{}, err
	}
	hs.promoteAfterFree(ctx, req.ResourceID)
	return hs.waitlistEntry(ctx, id)
}

// LeaveWaitlist takes a waiting entry out of line. Owner or admin; a promoted entry keeps its hold
// (give that up with CancelHold).
func (hs *Holds) LeaveWaitlist(ctx context.Context, a booking.Actor, id uint64) (booking.WaitlistEntry, error) {
	row, err := hs.ss.WaitlistEntry(ctx, id)
	if err != nil {
		return booking.WaitlistEntry{}, err
	}
	if !a.MayChange(row.UserID) {
		return booking.WaitlistEntry{}, booking.ErrNotFound
	}
	if booking.WaitStatus(row.Status) == booking.WaitWaiting {
		err := hs.ss.SetWaitStatus(ctx, id, booking.WaitWaiting, booking.WaitCancelled, "", hs.clock.Now(), nil)
		if err != nil && !sqlstore.IsStale(err) {
			return booking.WaitlistEntry{}, err
		}
	}
	return hs.waitlistEntry(ctx, id)
}

// ListWaitlist lists the actor's entries, newest first.
func (hs *Holds) ListWaitlist(ctx context.Context, a booking.Actor) ([]booking.WaitlistEntry, error) {
	rows, err := hs.ss.UserWaitlist(ctx, a.UserID, 100)
	if err != nil {
		return nil, err
	}
	out := make([]booking.WaitlistEntry, 0, len(rows))
	for _, r := range rows {
		out = append(out, hs.toWaitlistEntry(ctx, r))
	}
	return out, nil
}

func (hs *Holds) waitlistEntry(ctx context.Context, id uint64) (booking.WaitlistEntry, error) {
	row, err := hs.ss.WaitlistEntry(ctx, id)
	if err != nil {
		return booking.WaitlistEntry{}, err
	}
	return hs.toWaitlistEntry(ctx, row), nil
}

func (hs *Holds) toWaitlistEntry(ctx context.Context, r models.WaitlistEntry) booking.WaitlistEntry {
	out := booking.WaitlistEntry{ID: r.ID, UserID: r.UserID, VenueID: r.VenueID, ResourceID: r.ResourceID, Status: booking.WaitStatus(r.Status),
		Start: r.Start.UTC(), End: r.End.UTC(), Quantity: r.Quantity, HoldID: r.HoldID, CreatedAt: r.CreatedAt.UTC()}
	if vi, err := hs.cat.Venue(ctx, r.VenueID); err == nil {
		out.Start, out.End, out.CreatedAt = out.Start.In(vi.Loc), out.End.In(vi.Loc), out.CreatedAt.In(vi.Loc)
	}
	return out
}

// promoteAfterFree offers freed units to the resource's first waiters at once. A failure is only
// logged: the waitlist loop promotes every second anyway.
func (hs *Holds) promoteAfterFree(ctx context.Context, resourceID uint64) {
	if err := hs.promote(ctx, resourceID); err != nil {
		hs.log.Warn("waitlist promotion failed; the loop retries", "resource_id", resourceID, "err", err)
	}
}

// promote gives holds to the waiters of a resource, first come first served, while units are free.
// A waiter whose window is full is skipped (a later, smaller window may fit); one whose window has
// ended expires. Racing instances cannot promote an entry twice: WAITING → PROMOTED is conditional,
// and a hold that lost that race is given back.
func (hs *Holds) promote(ctx context.Context, resourceID uint64) error {
	rows, err := hs.ss.Waiting(ctx, resourceID, 200)
	if err != nil {
		return err
	}
	for _, r := range rows {
		now := hs.clock.Now()
		h, err := hs.Hold(ctx, HoldRequest{UserID: r.UserID, ResourceID: r.ResourceID, Start: r.Start, End: r.End, Quantity: r.Quantity})
		switch {
		case errors.Is(err, booking.ErrSlotFull), errors.Is(err, booking.ErrTooManyHolds):
			continue
		case errors.Is(err, booking.ErrSlotPast), errors.Is(err, booking.ErrSlotClosed), errors.Is(err, booking.ErrOffGrid), errors.Is(err, booking.ErrResourceInactive):
			if err := hs.ss.SetWaitStatus(ctx, r.ID, booking.WaitWaiting, booking.WaitExpired, "", now, nil); err != nil && !sqlstore.IsStale(err) {
				return err
			}
			continue
		case err != nil:
			if _, domain := booking.AsError(err); domain {
				continue // e.g. too_far after a horizon change: it may fit later; others still get their turn
			}
			return err
		}
		entry := hs.toWaitlistEntry(ctx, r)
		entry.Status, entry.HoldID = booking.WaitPromoted, h.ID
		ev := hs.events.waitlistEvent(booking.EventPromoted, entry, now)
		if err := hs.ss.SetWaitStatus(ctx, r.ID, booking.WaitWaiting, booking.WaitPromoted, h.ID, now, &ev); err != nil {
			if _, cerr := hs.CancelHold(ctx, booking.System, h.ID); cerr != nil {
				hs.log.Warn("give back an unneeded waitlist hold", "hold_id", h.ID, "err", cerr)
			}
			if sqlstore.IsStale(err) {
				continue
			}
			return err
		}
		metricPromotions.Inc()
		hs.log.Info("waitlist promoted", "entry", r.ID, "user", r.UserID, "hold_id", h.ID)
	}
	return nil
}

// promoteWaiting runs promotion for every resource that has waiters (the waitlist loop calls it every
// second, which covers units freed by expired holds; releases and cancels promote at once).
func (hs *Holds) promoteWaiting(ctx context.Context) error {
	ids, err := hs.ss.ResourcesWithWaiters(ctx, 500)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := hs.promote(ctx, id); err != nil {
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
