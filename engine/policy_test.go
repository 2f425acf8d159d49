package engine

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/models"
)

func iptr(v int) *int { return &v }

// payFor holds start..start+1h for a and pays for it with payment id pid.
func (tb *testBundle) payFor(t testing.TB, a booking.Actor, res Resource, start time.Time, pid string) booking.Booking {
	t.Helper()
	ctx := context.Background()
	h, err := tb.e.Hold(ctx, HoldRequest{UserID: a.UserID, ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.NoError(t, err)
	p, err := tb.e.Pay(ctx, PaymentNotice{HoldID: h.ID, PaymentID: pid, AmountCents: h.AmountCents, PaidAt: tb.clock.Now()})
	require.NoError(t, err)
	require.Equal(t, OutcomeBooked, p.Outcome)
	return *p.Booking
}

func (tb *testBundle) refunds(t testing.TB) []models.Refund {
	t.Helper()
	var rows []models.Refund
	require.NoError(t, tb.db.Gorm.Order("id").Find(&rows).Error)
	return rows
}

// The minimum notice and the days ahead decide what is sold, in holds and in availability alike, at
// their boundaries.
func TestNoticeAndDaysAhead(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 2, 60, "08:00", "22:00")
	_, err := tb.e.SetResourcePolicy(ctx, alice, res.ID, booking.PolicyInput{MinNoticeMinutes: iptr(120)})
	require.ErrorIs(t, err, booking.ErrForbidden)
	p, err := tb.e.SetResourcePolicy(ctx, booking.System, res.ID, booking.PolicyInput{MinNoticeMinutes: iptr(120), MaxDaysAhead: iptr(2)})
	require.NoError(t, err)
	require.Equal(t, 2*time.Hour, p.MinNotice)
	require.Equal(t, 100, p.CancelRefund, "fields left out keep their defaults")

	hold := func(start time.Time) error {
		_, err := tb.e.Hold(ctx, HoldRequest{UserID: "alice", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
		return err
	}
	// now is 10:00: 12:00 is exactly the notice, 11:00 inside it.
	require.ErrorIs(t, hold(at("11:00")), booking.ErrTooSoon)
	require.Equal(t, booking.ReasonTooSoon, tb.slotOf(t, res.ID, at("11:00")).Reason)
	require.NoError(t, hold(at("12:00")))
	require.True(t, tb.slotOf(t, res.ID, at("13:00")).Available)
	// Two days ahead, today included: tomorrow sells, the day after does not.
	require.NoError(t, hold(at("12:00").AddDate(0, 0, 1)))
	require.ErrorIs(t, hold(at("12:00").AddDate(0, 0, 2)), booking.ErrTooFar)
	require.Equal(t, booking.ReasonTooFar, tb.slotOf(t, res.ID, at("12:00").AddDate(0, 0, 2)).Reason)

	_, err = tb.e.SetResourcePolicy(ctx, booking.System, res.ID, booking.PolicyInput{CancelRefundPercent: iptr(101)})
	require.ErrorIs(t, err, booking.Invalid("invalid_policy", ""))
	_, err = tb.e.SetResourcePolicy(ctx, booking.System, 999999, booking.PolicyInput{})
	require.ErrorIs(t, err, booking.ErrNotFound)
}

// A user's cancel is refunded by the cut-off — the full share before it, the late share from it
// until start — and refused from start on; an admin's is refunded in full. Each refund is a row
// announced by refund.requested, in the cancel's own transaction.
func TestCancelRefundsByPolicy(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 4, 60, "08:00", "22:00")
	_, err := tb.e.SetResourcePolicy(ctx, booking.System, res.ID, booking.PolicyInput{CancelCutoffMinutes: iptr(60),
		CancelRefundPercent: iptr(90), LateCancelRefundPercent: iptr(30)})
	require.NoError(t, err)
	early := tb.payFor(t, alice, res, at("14:00"), "pay-early")
	late := tb.payFor(t, alice, res, at("14:00"), "pay-late")
	started := tb.payFor(t, alice, res, at("14:00"), "pay-started")
	byAdmin := tb.payFor(t, alice, res, at("14:00"), "pay-admin")

	tb.clock.Set(at("13:00").Add(-time.Millisecond))
	_, err = tb.e.CancelBooking(ctx, alice, early.ID)
	require.NoError(t, err)
	tb.clock.Set(at("13:00"))
	_, err = tb.e.CancelBooking(ctx, alice, late.ID)
	require.NoError(t, err)
	tb.clock.Set(at("14:00"))
	_, err = tb.e.CancelBooking(ctx, alice, started.ID)
	require.ErrorIs(t, err, booking.ErrCancellationClosed)
	got, err := tb.e.GetBooking(ctx, alice, started.ID)
	require.NoError(t, err)
	require.Equal(t, booking.Confirmed, got.Status, "a refused cancel changes nothing")
	_, err = tb.e.CancelBooking(ctx, booking.System, byAdmin.ID)
	require.NoError(t, err)

	rs := tb.refunds(t)
	require.Len(t, rs, 3)
	want := []struct {
		booking uint64
		percent int64
		reason  string
	}{{early.ID, 90, booking.RefundUserCancel}, {late.ID, 30, booking.RefundLateCancel}, {byAdmin.ID, 100, booking.RefundAdminCancel}}
	for i, w := range want {
		require.Equal(t, w.booking, *rs[i].BookingID)
		require.Equal(t, early.AmountCents*w.percent/100, rs[i].AmountCents)
		require.Equal(t, w.reason, rs[i].Reason)
		require.Equal(t, models.RefundRequested, rs[i].Status, "WeChat Pay is not configured: left for manual handling")
		require.Equal(t, models.ProviderNotify, rs[i].Provider)
	}
	require.Len(t, tb.events(t, booking.EventRefundReq), 3)
	listed, next, err := tb.e.ListRefunds(ctx, booking.System, models.RefundRequested, "", 2)
	require.NoError(t, err)
	require.Len(t, listed, 2)
	require.NotEmpty(t, next)
	require.Equal(t, strconv.FormatUint(rs[2].ID, 10), listed[0].RefundID, "newest first")
	// Their times in the venue's offset (Asia/Shanghai), as every time the API answers, and as
	// their refund.requested events show them.
	for _, l := range listed {
		require.True(t, strings.HasSuffix(l.CreatedAt, "+08:00"), "created_at %s", l.CreatedAt)
		require.True(t, strings.HasSuffix(l.UpdatedAt, "+08:00"), "updated_at %s", l.UpdatedAt)
	}
	var evs []models.OutboxEvent
	require.NoError(t, tb.db.Gorm.Where("type = ?", booking.EventRefundReq).Find(&evs).Error)
	require.Len(t, evs, 3)
	for _, ev := range evs {
		require.Contains(t, ev.Data, `+08:00"`, "the event's refund: %s", ev.Data)
		require.NotContains(t, ev.Data, `Z"`, "the event's refund: %s", ev.Data)
	}
	_, _, err = tb.e.ListRefunds(ctx, alice, "", "", 0)
	require.ErrorIs(t, err, booking.ErrForbidden)
}

// A no-show under a 50% policy is refunded half, in the release batch's transaction; a dev-confirmed
// booking (nothing paid) and a policy of 0% refund nothing.
func TestNoShowRefundInTheReleaseBatch(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	ctx := context.Background()
	half := tb.resource(t, 4, 60, "08:00", "22:00")
	none := tb.resourceAt(t, half.VenueID, 4, 60, "08:00", "22:00")
	_, err := tb.e.SetResourcePolicy(ctx, booking.System, half.ID, booking.PolicyInput{NoshowRefundPercent: iptr(50)})
	require.NoError(t, err)
	paid := tb.payFor(t, alice, half, at("11:00"), "pay-1")
	tb.book(t, alice, half, at("11:00")) // dev confirm: nothing paid
	tb.payFor(t, alice, none, at("11:00"), "pay-2")
	tb.clock.Set(at("11:15"))
	n, err := tb.e.ReleaseDue(ctx, half.VenueID)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	rs := tb.refunds(t)
	require.Len(t, rs, 1)
	require.Equal(t, paid.ID, *rs[0].BookingID)
	require.Equal(t, paid.AmountCents/2, rs[0].AmountCents)
	require.Equal(t, booking.RefundNoShow, rs[0].Reason)
}

// A payment for a hold whose units are gone books nothing and is refunded in full.
func TestLatePaymentIsRefunded(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.HoldTTL = time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	h, err := tb.e.Hold(ctx, HoldRequest{UserID: "alice", ResourceID: res.ID, Start: at("14:00"), End: at("15:00")})
	require.NoError(t, err)
	tb.clock.Advance(2 * time.Minute)
	tb.book(t, booking.Actor{UserID: "bob", Role: booking.RoleUser}, res, at("14:00"))
	out, err := tb.e.Pay(ctx, PaymentNotice{HoldID: h.ID, PaymentID: "late", AmountCents: h.AmountCents, PaidAt: tb.clock.Now()})
	require.NoError(t, err)
	require.Equal(t, OutcomeRefund, out.Outcome)
	again, err := tb.e.Pay(ctx, PaymentNotice{HoldID: h.ID, PaymentID: "late", AmountCents: h.AmountCents, PaidAt: tb.clock.Now()})
	require.NoError(t, err)
	require.Equal(t, OutcomeRefund, again.Outcome)
	rs := tb.refunds(t)
	require.Len(t, rs, 1, "refunded once, however often the provider repeats itself")
	require.Nil(t, rs[0].BookingID)
	require.Equal(t, h.AmountCents, rs[0].AmountCents)
	require.Equal(t, booking.RefundLatePayment, rs[0].Reason)
	require.Equal(t, "alice", rs[0].UserID)
	listed, _, err := tb.e.ListRefunds(ctx, booking.System, "", "", 0)
	require.NoError(t, err)
	raw, err := json.Marshal(listed)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"booking_id":null`, "the refund row names its booking, null when there is none")
}

// The no-show freeze: two no-shows within 30 days are over max_noshows 1 and freeze the user for 7
// days from the latest (403 account_frozen with until); one is at the maximum, not over it; a restore
// takes one back and unfreezes them at once.
func TestNoshowFreezeOnHolds(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 6, 60, "08:00", "22:00")
	_, err := tb.e.SetNoshowPolicy(ctx, alice, booking.NoshowPolicyInput{MaxNoshows: 1, WithinDays: 30, FreezeDays: 7})
	require.ErrorIs(t, err, booking.ErrForbidden)
	_, err = tb.e.SetNoshowPolicy(ctx, booking.System, booking.NoshowPolicyInput{MaxNoshows: 1, WithinDays: 30, FreezeDays: 7})
	require.NoError(t, err)
	first := tb.book(t, alice, res, at("11:00"))
	tb.book(t, alice, res, at("11:00"))
	// Released in the same batch: carol goes over the maximum too, bob stays at it.
	carol, bob := booking.Actor{UserID: "carol", Role: booking.RoleUser}, booking.Actor{UserID: "bob", Role: booking.RoleUser}
	tb.book(t, carol, res, at("11:00"))
	tb.book(t, carol, res, at("11:00"))
	tb.book(t, bob, res, at("11:00"))
	holdBy := func(user string) error {
		_, err := tb.e.Hold(ctx, HoldRequest{UserID: user, ResourceID: res.ID, Start: at("18:00"), End: at("19:00")})
		return err
	}
	hold := func() error { return holdBy("alice") }
	require.NoError(t, hold(), "no no-show yet")
	tb.clock.Set(at("11:15"))
	n, err := tb.e.ReleaseDue(ctx, res.VenueID)
	require.NoError(t, err)
	require.Equal(t, 5, n)
	for _, user := range []string{"alice", "carol"} {
		err = holdBy(user)
		require.ErrorIs(t, err, booking.ErrAccountFrozen, user)
		e, _ := booking.AsError(err)
		require.Equal(t, at("11:15").Add(7*24*time.Hour).UTC(), e.Details["until"].(time.Time).UTC(), user)
	}
	require.NoError(t, holdBy("bob"), "one no-show: at max_noshows, not over it")
	require.NoError(t, holdBy("dave"), "others are not frozen")

	tb.clock.Set(at("11:20"))
	_, err = tb.e.Restore(ctx, alice, first.ID)
	require.NoError(t, err)
	require.NoError(t, hold(), "one no-show left: not over the maximum")
}

// TestNoshowFreezeSetByTheSweepWhenItsAnnouncementIsLost: a release whose process died before it
// announced the no-shows (nothing reacts here) leaves the owner unfrozen until the freezes loop reads
// SQL; that loop then freezes her.
func TestNoshowFreezeSetByTheSweepWhenItsAnnouncementIsLost(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 6, 60, "08:00", "22:00")
	loops := tb.e.NewLoops(LoopsConfig{})
	require.NoError(t, loops.Run(ctx, "freezes"), "the rule is off")
	_, err := tb.e.SetNoshowPolicy(ctx, booking.System, booking.NoshowPolicyInput{MaxNoshows: 1, WithinDays: 30, FreezeDays: 7})
	require.NoError(t, err)
	tb.book(t, alice, res, at("11:00"))
	tb.book(t, alice, res, at("11:00")) // two no-shows: over max_noshows 1
	tb.e.Holds.freed.reactions = nil    // the process dies between the release's commit and its announcement
	tb.clock.Set(at("11:15"))
	n, err := tb.e.ReleaseDue(ctx, res.VenueID)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	hold := func() error {
		_, err := tb.e.Hold(ctx, HoldRequest{UserID: "alice", ResourceID: res.ID, Start: at("18:00"), End: at("19:00")})
		return err
	}
	require.NoError(t, hold(), "nothing reacted to the release")
	require.NoError(t, loops.Run(ctx, "freezes"))
	require.ErrorIs(t, hold(), booking.ErrAccountFrozen)
}
