package engine

import (
	"context"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/catalog"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
)

// The venue's decisions on a booking (docs/API.md "Approval and the front desk"): approve or
// decline a booking that waits for approval, cancel one for the venue, restore a released one on
// the guest's appeal. Each is one guarded change through apply, with the reason staff gave written
// into the booking's history. Staff of the booking's venue, or admin; others get ErrNotFound.

// Decision is what staff send with an action: why (into the history), and for a cancel whether
// the guest is refunded in full or by the resource's policy.
type Decision struct {
	Reason     string
	FullRefund bool
}

// Approve confirms a booking that waits for approval: it goes on as a paid booking does, with a
// release task at start + grace.
func (bs *Bookings) Approve(ctx context.Context, a booking.Actor, id uint64, d Decision) (booking.Booking, error) {
	return bs.decide(ctx, a, id, d.Reason, false, func(b *sqlstore.Booking, ri *catalog.ResourceInfo, reason string) (booking.Change, error) {
		grace, err := bs.catalog.graceFor(ctx, ri, b.Start)
		if err != nil {
			return booking.Change{}, err
		}
		return b.Approve(bs.clock.Now(), grace, a.Name(), reason)
	})
}

// Decline refuses a booking that waits for approval: its units come back at once and its payment
// is refunded in full through the refund path.
func (bs *Bookings) Decline(ctx context.Context, a booking.Actor, id uint64, d Decision) (booking.Booking, error) {
	return bs.decide(ctx, a, id, d.Reason, true, func(b *sqlstore.Booking, _ *catalog.ResourceInfo, reason string) (booking.Change, error) {
		return b.Decline(bs.clock.Now(), a.Name(), reason)
	})
}

// VenueCancel cancels a booking for the venue (CANCELLED_BY_ADMIN), refunded in full or by the
// resource's policy.
func (bs *Bookings) VenueCancel(ctx context.Context, a booking.Actor, id uint64, d Decision) (booking.Booking, error) {
	return bs.decide(ctx, a, id, d.Reason, true, func(b *sqlstore.Booking, ri *catalog.ResourceInfo, reason string) (booking.Change, error) {
		return b.AdminCancel(a, bs.clock.Now(), ri.Policy, d.FullRefund, reason)
	})
}

// Appeal restores a released booking on its guest's appeal, past the guest's own restore window
// up to the end of the slot, if its units are still free.
func (bs *Bookings) Appeal(ctx context.Context, a booking.Actor, id uint64, d Decision) (booking.Booking, error) {
	return bs.decide(ctx, a, id, d.Reason, true, func(b *sqlstore.Booking, ri *catalog.ResourceInfo, reason string) (booking.Change, error) {
		grace, err := bs.catalog.graceFor(ctx, ri, b.Start)
		if err != nil {
			return booking.Change{}, err
		}
		return b.Appeal(bs.clock.Now(), grace, a.Name(), reason)
	})
}

// decide runs one of the venue's decisions on booking id: the reason checked (required or not),
// the actor allowed for the booking's venue, the change picked by fn with the booking's resource.
func (bs *Bookings) decide(ctx context.Context, a booking.Actor, id uint64, reason string, required bool,
	fn func(b *sqlstore.Booking, ri *catalog.ResourceInfo, reason string) (booking.Change, error)) (booking.Booking, error) {
	reason, err := booking.Reason(reason, required)
	if err != nil {
		return booking.Booking{}, err
	}
	b, _, err := bs.apply(ctx, id, func(b *sqlstore.Booking) (booking.Change, error) {
		if !a.MayDecide(b.VenueID) {
			return booking.Change{}, booking.ErrNotFound
		}
		ri, err := bs.cat.Resource(ctx, b.ResourceID)
		if err != nil {
			return booking.Change{}, err
		}
		return fn(b, ri, reason)
	})
	if err != nil {
		return booking.Booking{}, err
	}
	return bs.view(ctx, &b.Booking)
}
