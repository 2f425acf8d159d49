package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
	"github.com/slotwheel/slotwheel/models"
)

// approvalResource is a resource of capacity whose bookings wait for staff, within window.
func (tb *testBundle) approvalResource(t testing.TB, capacity int, window time.Duration) Resource {
	t.Helper()
	res := tb.resource(t, capacity, 60, "08:00", "22:00")
	yes, mins := true, int(window/time.Minute)
	_, err := tb.e.SetResourcePolicy(context.Background(), booking.System, res.ID,
		booking.PolicyInput{RequiresApproval: &yes, ApprovalWindowMinutes: &mins})
	require.NoError(t, err)
	return res
}

func deskOf(venueID uint64) booking.Actor {
	return booking.Actor{UserID: "desk", Role: booking.RoleStaff, VenueID: venueID}
}

// A paid booking of an approval-required resource waits, its units taken in Redis and in the
// capacity ledger; approved, it goes on as any booking, released at start + grace.
func TestApprovalHoldsTheUnitsUntilApproved(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	ctx := context.Background()
	res := tb.approvalResource(t, 1, 30*time.Minute)
	b := tb.payFor(t, alice, res, at("14:00"), "pay-a")
	require.Equal(t, booking.PendingApproval, b.Status)
	require.True(t, b.ReleaseAt.Equal(at("10:30")), "the deadline: paid at 10:00, 30 minutes to decide; got %s", b.ReleaseAt)
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, at("14:00")), "Redis counts it")
	require.Equal(t, 1, tb.ledger(t, res.ID, at("14:00")), "the capacity ledger counts it")
	require.Equal(t, "full", tb.slotOf(t, res.ID, at("14:00")).Reason)
	require.Equal(t, []string{sqlstore.BookingSubject(b.ID)}, tb.events(t, booking.EventPendingApproval))
	require.Empty(t, tb.events(t, booking.EventConfirmed), "not confirmed before staff decide")

	_, err := tb.e.CheckIn(ctx, deskOf(res.VenueID), b.CheckinCode)
	require.ErrorIs(t, err, booking.ErrAwaitingApproval)
	other := deskOf(res.VenueID + 1)
	_, err = tb.e.Approve(ctx, other, b.ID, Decision{})
	require.ErrorIs(t, err, booking.ErrNotFound, "another venue's staff learn nothing")
	_, err = tb.e.Approve(ctx, alice, b.ID, Decision{})
	require.ErrorIs(t, err, booking.ErrNotFound, "the guest cannot approve their own booking")

	tb.clock.Set(at("10:10"))
	ok, err := tb.e.Approve(ctx, deskOf(res.VenueID), b.ID, Decision{Reason: "member"})
	require.NoError(t, err)
	require.Equal(t, booking.Confirmed, ok.Status)
	require.True(t, ok.ReleaseAt.Equal(at("14:15")), "start + grace, got %s", ok.ReleaseAt)
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, at("14:00")), "approval keeps the units")
	require.Equal(t, 1, tb.ledger(t, res.ID, at("14:00")))
	require.Equal(t, []string{sqlstore.BookingSubject(b.ID)}, tb.events(t, booking.EventConfirmed))
	h, err := tb.e.History(ctx, deskOf(res.VenueID), b.ID)
	require.NoError(t, err)
	last := h[len(h)-1]
	require.Equal(t, HistoryEntry{From: "PENDING_APPROVAL", To: "CONFIRMED", At: at("10:10"), Actor: "staff:desk", Reason: "approved: member"},
		HistoryEntry{From: last.From, To: last.To, At: last.At.In(shanghai), Actor: last.Actor, Reason: last.Reason})

	// The deadline's task is gone with the deadline: at 10:30 nothing is declined.
	tb.clock.Set(at("10:30"))
	require.Equal(t, 0, tb.releaseDue(t, res.VenueID))
	require.Empty(t, tb.refunds(t))
	// The release goes on as for any booking.
	tb.clock.Set(at("14:15"))
	require.Equal(t, 1, tb.releaseDue(t, res.VenueID))
	got, err := tb.e.GetBooking(ctx, alice, b.ID)
	require.NoError(t, err)
	require.Equal(t, booking.Released, got.Status)
}

// releaseDue runs a release batch of the venue, as the loop would, and answers how many it decided.
func (tb *testBundle) releaseDue(t testing.TB, venueID uint64) int {
	t.Helper()
	n, err := tb.e.ReleaseDue(context.Background(), venueID)
	require.NoError(t, err)
	return n
}

// Declined by staff: the units come back at once and the payment is refunded in full through the
// refund path.
func TestDeclineGivesTheUnitsBackAndRefunds(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.approvalResource(t, 1, time.Hour)
	b := tb.payFor(t, alice, res, at("14:00"), "pay-d")

	_, err := tb.e.Decline(ctx, deskOf(res.VenueID), b.ID, Decision{Reason: " "})
	require.ErrorIs(t, err, booking.ErrReasonRequired, "a decline says why")
	d, err := tb.e.Decline(ctx, deskOf(res.VenueID), b.ID, Decision{Reason: "court under repair"})
	require.NoError(t, err)
	require.Equal(t, booking.Declined, d.Status)
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, at("14:00")))
	require.Equal(t, 0, tb.ledger(t, res.ID, at("14:00")))
	rs := tb.refunds(t)
	require.Len(t, rs, 1)
	require.Equal(t, b.AmountCents, rs[0].AmountCents)
	require.Equal(t, booking.RefundDeclined, rs[0].Reason)
	require.Equal(t, models.RefundRequested, rs[0].Status)
	require.Equal(t, []string{sqlstore.BookingSubject(b.ID)}, tb.events(t, booking.EventDeclined))

	// The slot is bookable again, and a second decline changes nothing.
	tb.payFor(t, bob, res, at("14:00"), "pay-b")
	again, err := tb.e.Decline(ctx, deskOf(res.VenueID), b.ID, Decision{Reason: "again"})
	require.NoError(t, err)
	require.Equal(t, booking.Declined, again.Status)
	require.Len(t, tb.refunds(t), 1)
	_, err = tb.e.Approve(ctx, deskOf(res.VenueID), b.ID, Decision{})
	require.ErrorIs(t, err, booking.ErrNotPendingApproval)
}

// The deadline is the release's timer: never early, through the release loop or the task, and it
// declines with a full refund.
func TestApprovalDeadlineDeclinesNeverEarly(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.approvalResource(t, 1, 20*time.Minute)
	other := tb.approvalResource(t, 1, 20*time.Minute) // of another venue
	b1 := tb.payFor(t, alice, res, at("14:00"), "pay-1")
	b2 := tb.payFor(t, bob, other, at("14:00"), "pay-2")
	deadline := at("10:20")
	require.True(t, b1.ReleaseAt.Equal(deadline))

	tb.clock.Set(deadline.Add(-time.Millisecond))
	require.Equal(t, 0, tb.releaseDue(t, res.VenueID), "a millisecond early")
	_, err := tb.e.Release(ctx, releaseRef(b2))
	var notDue *booking.NotDueError
	require.ErrorAs(t, err, &notDue)

	tb.clock.Set(deadline)
	_, err = tb.e.Approve(ctx, deskOf(res.VenueID), b1.ID, Decision{})
	require.ErrorIs(t, err, booking.ErrApprovalLapsed, "too late to approve at the deadline")
	require.Equal(t, 1, tb.releaseDue(t, res.VenueID), "the release loop's batch declines one")
	require.Equal(t, release.Released, tb.releaseTask(t, b2), "the booking's task the other")
	for _, b := range []booking.Booking{b1, b2} {
		got, err := tb.e.GetBooking(ctx, booking.System, b.ID)
		require.NoError(t, err)
		require.Equal(t, booking.Declined, got.Status)
		require.NotNil(t, got.CancelledAt)
		require.Nil(t, got.ReleasedAt, "a decline is not a no-show")
		require.Equal(t, 0, tb.used(t, got.VenueID, got.ResourceID, at("14:00")))
		require.Equal(t, 0, tb.ledger(t, got.ResourceID, at("14:00")))
	}
	rs := tb.refunds(t)
	require.Len(t, rs, 2)
	for _, r := range rs {
		require.Equal(t, booking.RefundDeclined, r.Reason)
		require.Equal(t, r.PaidCents, r.AmountCents, "in full")
	}
	n, err := tb.e.NoShows(ctx, "alice")
	require.NoError(t, err)
	require.Zero(t, n, "a declined booking is not the guest's no-show")
	require.Len(t, tb.events(t, booking.EventDeclined), 2)
	require.Empty(t, tb.events(t, booking.EventReleased))
}

func releaseRef(b booking.Booking) release.Ref {
	return release.Ref{BookingID: b.ID, ReleaseAt: b.ReleaseAt}
}

// A thousand guests race for the last units of an approval-required slot: exactly its capacity
// wait for approval, in Redis and in the ledger; the rest are told the slot is full.
func TestApprovalRaceForTheLastUnits(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	const capacity, guests = 5, 1000
	res := tb.approvalResource(t, capacity+1, time.Hour)
	tb.payFor(t, alice, res, at("15:00"), "pay-first") // one unit already waits for approval
	var held, full atomic.Int64
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range guests {
		wg.Go(func() {
			<-gate
			user := fmt.Sprintf("guest-%d", i)
			h, err := tb.e.Hold(ctx, HoldRequest{UserID: user, ResourceID: res.ID, Start: at("15:00"), End: at("16:00")})
			if err != nil {
				assert.ErrorIs(t, err, booking.ErrSlotFull)
				full.Add(1)
				return
			}
			p, err := tb.e.Pay(ctx, PaymentNotice{HoldID: h.ID, PaymentID: "pay-" + user, AmountCents: h.AmountCents, PaidAt: tb.clock.Now()})
			if !assert.NoError(t, err) || !assert.Equal(t, OutcomeBooked, p.Outcome) {
				return
			}
			assert.Equal(t, booking.PendingApproval, p.Booking.Status)
			held.Add(1)
		})
	}
	close(gate)
	wg.Wait()
	require.Equal(t, int64(capacity), held.Load())
	require.Equal(t, int64(guests-capacity), full.Load())
	var pending int64
	require.NoError(t, tb.db.Gorm.Model(&models.Booking{}).Where("resource_id = ? AND status = ?", res.ID, string(booking.PendingApproval)).
		Count(&pending).Error)
	require.Equal(t, int64(capacity+1), pending, "exactly the capacity waits for approval")
	require.Equal(t, capacity+1, tb.used(t, res.VenueID, res.ID, at("15:00")))
	require.Equal(t, capacity+1, tb.ledger(t, res.ID, at("15:00")))
}

// The venue's other decisions: a cancel refunded in full or by the policy, and a restore on the
// guest's appeal past their own window, up to the slot's end.
func TestVenueCancelAndAppeal(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	_, err := tb.e.SetResourcePolicy(ctx, booking.System, res.ID, booking.PolicyInput{CancelCutoffMinutes: iptr(24 * 60), LateCancelRefundPercent: iptr(40)})
	require.NoError(t, err)
	desk := deskOf(res.VenueID)

	byPolicy := tb.payFor(t, alice, res, at("12:00"), "pay-p")
	c, err := tb.e.VenueCancel(ctx, desk, byPolicy.ID, Decision{Reason: "rain", FullRefund: false})
	require.NoError(t, err)
	require.Equal(t, booking.CancelledByAdmin, c.Status)
	inFull := tb.payFor(t, alice, res, at("13:00"), "pay-f")
	_, err = tb.e.VenueCancel(ctx, desk, inFull.ID, Decision{Reason: "rain", FullRefund: true})
	require.NoError(t, err)
	_, err = tb.e.VenueCancel(ctx, desk, inFull.ID, Decision{})
	require.ErrorIs(t, err, booking.ErrReasonRequired)
	rs := tb.refunds(t)
	require.Len(t, rs, 2)
	require.Equal(t, byPolicy.AmountCents*40/100, rs[0].AmountCents, "late: the late share")
	require.Equal(t, inFull.AmountCents, rs[1].AmountCents)
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, at("12:00")))

	noShow := tb.payFor(t, alice, res, at("14:00"), "pay-n")
	tb.clock.Set(at("14:15"))
	require.Equal(t, 1, tb.releaseDue(t, res.VenueID))
	late := at("14:15").Add(tb.e.Rules().RestoreWindow + time.Minute)
	tb.clock.Set(late)
	_, err = tb.e.Restore(ctx, alice, noShow.ID)
	require.ErrorIs(t, err, booking.ErrRestoreWindowClosed, "the guest's own window is over")
	back, err := tb.e.Appeal(ctx, desk, noShow.ID, Decision{Reason: "phone died at the gate"})
	require.NoError(t, err)
	require.Equal(t, booking.Confirmed, back.Status)
	require.True(t, back.ReleaseAt.Equal(late.Add(15*time.Minute)))
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, at("14:00")))
	n, err := tb.e.NoShows(ctx, "alice")
	require.NoError(t, err)
	require.Zero(t, n, "the appeal takes the no-show back")
}
