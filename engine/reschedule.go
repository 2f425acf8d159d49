package engine

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/catalog"
	"github.com/slotwheel/slotwheel/engine/detach"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
)

// RescheduleRequest moves a booking to another window: Start (and End, for a resource booking) on
// the grid, optionally on another resource of the same venue and price (ResourceID).
type RescheduleRequest struct {
	BookingID  uint64
	Start, End time.Time
	ResourceID uint64 // 0: the booking's own
}

// errMoveRaced: the booking changed between the move's reservation and its commit.
var errMoveRaced = errors.New("the booking changed while it was being moved")

// Reschedule moves a booking to another window (docs/API.md "Reschedule"). Owner or admin. It
// follows the order of a confirm: Redis first reserves what the new window needs beyond the
// booking's own units (all or nothing: 409 slot_full when it is taken), MySQL then commits the move
// with its history row and event, and Redis finally leaves the booking holding exactly the new
// window. When MySQL certainly refused, the reservation is given back and the booking keeps its old
// window; when the commit's outcome is unknown the move stays reserved and the sweep resolves it
// from MySQL. Either way the booking ends with exactly one window, and no slot is ever counted over
// its capacity.
func (bs *Bookings) Reschedule(ctx context.Context, a booking.Actor, req RescheduleRequest) (booking.Booking, error) {
	b, err := bs.mayRead(ctx, a, req.BookingID)
	if err != nil {
		return booking.Booking{}, err
	}
	if !a.MayChange(b.UserID) {
		return booking.Booking{}, booking.ErrNotFound
	}
	if req.Start.IsZero() {
		return booking.Booking{}, booking.Invalid("missing_start", "start is required").WithField("start")
	}
	cur, err := bs.cat.Resource(ctx, b.ResourceID)
	if err != nil {
		return booking.Booking{}, err
	}
	ri := cur
	if len(b.Roles) > 0 && req.ResourceID != 0 && req.ResourceID != b.ResourceID {
		// A booking of several resources moves in time with the same resources.
		return booking.Booking{}, booking.Invalid("invalid_resources", "a booking of a service with roles keeps its resources when it moves").WithField("resource_id")
	}
	if req.ResourceID != 0 && req.ResourceID != b.ResourceID {
		if ri, err = bs.cat.Resource(ctx, req.ResourceID); err != nil {
			return booking.Booking{}, booking.Unknown(err, "unknown_resource", "resource %d does not exist", req.ResourceID)
		}
		if ri.Resource.VenueID != b.VenueID {
			return booking.Booking{}, booking.Invalid("unknown_resource", "resource %d is not a resource of the booking's venue", req.ResourceID).WithField("resource_id")
		}
	}
	var si *catalog.ServiceInfo
	if b.ServiceID != 0 {
		if si, err = bs.cat.Service(ctx, b.ServiceID); err != nil {
			return booking.Booking{}, err
		}
		if !slices.Contains(si.ResourceIDs, ri.Resource.ID) {
			return booking.Booking{}, booking.Invalid("resource_not_in_service", "resource %d does not deliver the booking's service", ri.Resource.ID).WithField("resource_id")
		}
	}
	now := bs.clock.Now()
	p, err := catalog.Offer(ri, si).Place(req.Start, req.End, b.Quantity, now)
	if err != nil {
		return booking.Booking{}, err
	}
	grace, err := bs.catalog.graceFor(ctx, ri, p.Start)
	if err != nil {
		return booking.Booking{}, err
	}
	fields, days := redisstore.SlotFields(ri.Resource.ID, p.Slots)
	for _, role := range b.Roles[min(1, len(b.Roles)):] {
		rr, err := bs.cat.Resource(ctx, role.ResourceID)
		if err != nil {
			return booking.Booking{}, err
		}
		rp, err := catalog.Offer(rr, si).Place(req.Start, req.End, b.Quantity, now)
		if err != nil {
			return booking.Booking{}, err
		}
		f, d := redisstore.SlotFields(rr.Resource.ID, rp.Slots)
		fields, days = append(fields, f...), append(days, d...)
	}
	decide := func(x *sqlstore.Booking) (booking.Change, error) {
		c, err := x.Reschedule(p, ri.Resource.ID, grace, a.Name(), now, cur.Policy)
		if err == nil {
			x.Fields = fields
			bs.setTimers(x, now)
		}
		return c, err
	}
	// Decided once on a copy first: a move the rules refuse touches nothing.
	probe := b
	if c, err := decide(&probe); err != nil || c.None() {
		if err != nil {
			return booking.Booking{}, err
		}
		return bs.view(ctx, &b.Booking) // already on that window
	}
	ver := b.Version + 1
	if err := bs.reserveMove(ctx, ri, redisstore.BookingUnits{BookingID: b.ID, Qty: b.Quantity, Fields: fields, Version: ver}, days); err != nil {
		return booking.Booking{}, err
	}
	old := release.Ref{BookingID: b.ID, ReleaseAt: b.ReleaseAt}
	if h := bs.hooks.beforeMoveCommit; h != nil {
		if err := h(); errors.Is(err, errSimulatedCrash) {
			return booking.Booking{}, err
		}
	}
	moved, _, err := bs.ss.UpdateBooking(ctx, b.ID, func(x *sqlstore.Booking) (booking.Change, error) {
		if x.Version != b.Version {
			return booking.Change{}, errMoveRaced
		}
		if c, err := decide(x); err != nil || !c.None() {
			return c, err
		}
		return booking.Change{}, errMoveRaced // moved there meanwhile
	})
	lctx, cancel := detach.Later(ctx)
	defer cancel()
	switch {
	case errors.Is(err, sqlstore.ErrCommitUnknown):
		// Like a confirm whose acknowledgement was lost: the sweep asks MySQL and ends the move.
		return booking.Booking{}, errors.Join(booking.ErrStorageUnavailable, err)
	case err != nil:
		if _, aerr := bs.rs.AbortMove(lctx, b.VenueID, b.ID, ver); aerr != nil {
			bs.log.Warn("abort move failed; the sweep will", "booking_id", b.ID, "err", aerr)
		}
		if errors.Is(err, errMoveRaced) {
			return booking.Booking{}, booking.ErrInvalidTransition
		}
		return booking.Booking{}, bs.ledgerRefusal(b.VenueID, err)
	}
	if h := bs.hooks.afterMoveCommit; h != nil {
		if err := h(); errors.Is(err, errSimulatedCrash) {
			return booking.Booking{}, err
		}
	}
	if _, err := bs.rs.FinishMove(lctx, b.VenueID, b.ID, ver); err != nil {
		bs.log.Warn("finish move failed; the sweep will", "booking_id", b.ID, "err", err)
	}
	metricReschedules.Inc()
	if bs.sched != nil {
		if err := bs.sched.CancelRelease(lctx, old); err != nil {
			bs.log.Warn("cancel release task failed; its handler will do nothing", "booking_id", b.ID, "err", err)
		}
	}
	bs.scheduleIfDue(lctx, &moved)
	bs.freed.announce(lctx, freedUnits{resources: []uint64{cur.Resource.ID}})
	return bs.view(ctx, &moved.Booking)
}

// reserveMove runs the move's reservation, loading the new window's cold days from SQL first.
func (bs *Bookings) reserveMove(ctx context.Context, ri *catalog.ResourceInfo, u redisstore.BookingUnits, days []string) error {
	for attempt := 0; ; attempt++ {
		out, cold, err := bs.rs.ReserveMove(ctx, ri.Resource.VenueID, u, days, bs.clock.Now(), bs.confirmStaleAfter)
		if err != nil {
			return err
		}
		switch out {
		case redisstore.MoveOK:
			return nil
		case redisstore.MoveFull:
			return booking.ErrSlotFull
		case redisstore.MoveClosed:
			return booking.ErrSlotClosed
		case redisstore.MoveBusy:
			return booking.ErrConfirmInProgress
		case redisstore.MoveMissing:
			// Redis lost the booking's units: count them again from SQL, then retry once.
			if attempt > 0 {
				return redisstore.Unexpected("reschedule: the booking's units are not counted")
			}
			if err := bs.upkeep.repairVenue(ctx, ri.Resource.VenueID, &ReconcileReport{}); err != nil {
				return err
			}
		case redisstore.MoveCold:
			if attempt >= 10 {
				return redisstore.Unexpected("reschedule: day would not load")
			}
			if err := bs.holds.loadDayField(ctx, cold); err != nil {
				return err
			}
		default:
			return redisstore.Unexpected("reserve move: unexpected answer " + string(out))
		}
	}
}

// sweepMoves ends the moves a process left behind (it died, or its commit's outcome was lost): a
// move MySQL committed is finished, any other aborted. A move younger than ConfirmStaleAfter may
// still be under way and is left alone.
func (bs *Bookings) sweepMoves(ctx context.Context, venueID uint64, now time.Time) error {
	moves, err := bs.rs.PendingMoves(ctx, venueID)
	if err != nil || len(moves) == 0 {
		return err
	}
	var errs []error
	for _, m := range moves {
		if now.Sub(m.Since) < bs.confirmStaleAfter {
			continue
		}
		b, err := bs.ss.Booking(ctx, m.BookingID)
		if err != nil && !errors.Is(err, booking.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		if err == nil && b.Version >= m.Version && sameFields(b.Fields, m.Fields) {
			_, err = bs.rs.FinishMove(ctx, venueID, m.BookingID, m.Version)
		} else {
			_, err = bs.rs.AbortMove(ctx, venueID, m.BookingID, m.Version)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func sameFields(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The metrics of this file (engine.go says why they are package-level).
var (
	metricReschedules = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_reschedules_total", Help: "Bookings moved to another window (they stay CONFIRMED, so this is no status transition).",
	})
)
