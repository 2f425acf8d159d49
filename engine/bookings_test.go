package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/models"
)

var alice = booking.Actor{UserID: "alice", Role: booking.RoleUser}

// book holds and confirms one slot for actor.
func (tb *testBundle) book(t testing.TB, a booking.Actor, res Resource, start time.Time) booking.Booking {
	t.Helper()
	ctx := context.Background()
	h, err := tb.e.Hold(ctx, HoldRequest{UserID: a.UserID, ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.NoError(t, err)
	b, err := tb.e.Confirm(ctx, a, h.ID)
	require.NoError(t, err)
	return b
}

func TestReleaseNeverEarlyExactlyOnce(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	b := tb.book(t, alice, res, at("11:00"))
	require.True(t, b.ReleaseAt.Equal(at("11:15")), "release_at = start + grace, got %s", b.ReleaseAt)
	ref := release.Ref{BookingID: b.ID, ReleaseAt: b.ReleaseAt}

	tb.clock.Set(at("11:15").Add(-time.Millisecond))
	_, err := tb.e.Release(ctx, ref)
	var notDue *booking.NotDueError
	require.ErrorAs(t, err, &notDue, "a millisecond early does nothing")
	require.Equal(t, time.Millisecond, notDue.Wait)
	got, err := tb.e.GetBooking(ctx, alice, b.ID)
	require.NoError(t, err)
	require.Equal(t, booking.Confirmed, got.Status)

	tb.clock.Set(at("11:15"))
	out, err := tb.e.Release(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, release.Released, out)
	out, err = tb.e.Release(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, release.AlreadyReleased, out, "a duplicate delivery changes nothing")
	got, err = tb.e.GetBooking(ctx, alice, b.ID)
	require.NoError(t, err)
	require.Equal(t, booking.Released, got.Status)
	require.Equal(t, 2, got.Version, "released exactly once")
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, at("11:00")))
	n, err := tb.e.NoShows(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var history []models.BookingHistory
	require.NoError(t, tb.db.Gorm.Where("booking_id = ?", b.ID).Order("id").Find(&history).Error)
	require.Len(t, history, 2)
	require.Equal(t, string(booking.Released), history[1].ToStatus)

	// The slot is bookable again by someone else.
	tb.book(t, booking.Actor{UserID: "bob", Role: booking.RoleUser}, res, at("11:00"))
}

func TestReleaseAtForLateConfirmKeepsGrace(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 10 * time.Minute })
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	tb.clock.Set(at("11:20"))
	b := tb.book(t, alice, res, at("11:00"))
	require.True(t, b.ReleaseAt.Equal(at("11:30")), "max(start, confirmed_at) + grace, got %s", b.ReleaseAt)
}

func TestCheckInBeatsRelease(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	staff := booking.Actor{UserID: "s", Role: booking.RoleStaff, VenueID: res.VenueID}
	b := tb.book(t, alice, res, at("12:00"))

	_, err := tb.e.CheckIn(ctx, staff, b.CheckinCode)
	require.ErrorIs(t, err, booking.ErrTooEarly, "check-in opens 30 minutes before start")
	_, err = tb.e.CheckIn(ctx, booking.Actor{UserID: "s2", Role: booking.RoleStaff, VenueID: res.VenueID + 1000}, b.CheckinCode)
	require.Error(t, err, "staff of another venue cannot check in")
	_, err = tb.e.CheckIn(ctx, alice, b.CheckinCode)
	require.ErrorIs(t, err, booking.ErrForbidden)

	tb.clock.Set(b.ReleaseAt.Add(-time.Millisecond))
	got, err := tb.e.CheckIn(ctx, staff, b.CheckinCode)
	require.NoError(t, err)
	require.Equal(t, booking.Arrived, got.Status)
	tb.clock.Set(b.ReleaseAt.Add(time.Second))
	out, err := tb.e.Release(ctx, release.Ref{BookingID: b.ID, ReleaseAt: b.ReleaseAt})
	require.NoError(t, err)
	require.Equal(t, release.NotApplicable, out)
	got, err = tb.e.GetBooking(ctx, alice, b.ID)
	require.NoError(t, err)
	require.Equal(t, booking.Arrived, got.Status)
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, at("12:00")), "an arrived booking keeps its unit")
}

func TestCancelGivesUnitsBackAndIsGuarded(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	b := tb.book(t, alice, res, at("13:00"))
	_, err := tb.e.CancelBooking(ctx, booking.Actor{UserID: "mallory", Role: booking.RoleUser}, b.ID)
	require.ErrorIs(t, err, booking.ErrNotFound, "another user cannot cancel it")
	got, err := tb.e.CancelBooking(ctx, alice, b.ID)
	require.NoError(t, err)
	require.Equal(t, booking.CancelledByUser, got.Status)
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, at("13:00")))
	_, err = tb.e.CancelBooking(ctx, alice, b.ID)
	require.NoError(t, err, "a repeated cancel answers the same")
	tb.clock.Set(b.ReleaseAt)
	out, err := tb.e.Release(ctx, release.Ref{BookingID: b.ID, ReleaseAt: b.ReleaseAt})
	require.NoError(t, err)
	require.Equal(t, release.NotApplicable, out, "a cancelled booking is never released")
	_, err = tb.e.Restore(ctx, alice, b.ID)
	require.ErrorIs(t, err, booking.ErrInvalidTransition)
}

func TestRestoreWithinWindow(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	b := tb.book(t, alice, res, at("12:00"))
	tb.clock.Set(b.ReleaseAt)
	_, err := tb.e.Release(ctx, release.Ref{BookingID: b.ID, ReleaseAt: b.ReleaseAt})
	require.NoError(t, err)
	tb.clock.Advance(10 * time.Minute)
	got, err := tb.e.Restore(ctx, alice, b.ID)
	require.NoError(t, err)
	require.Equal(t, booking.Confirmed, got.Status)
	require.True(t, got.ReleaseAt.Equal(tb.clock.Now().Add(15*time.Minute)), "new release_at = now + grace")
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, at("12:00")))
	// The old task does nothing; the new one releases.
	out, err := tb.e.Release(ctx, release.Ref{BookingID: b.ID, ReleaseAt: b.ReleaseAt})
	require.NoError(t, err)
	require.Equal(t, release.NotApplicable, out)
	tb.clock.Set(got.ReleaseAt)
	out, err = tb.e.Release(ctx, release.Ref{BookingID: b.ID, ReleaseAt: got.ReleaseAt})
	require.NoError(t, err)
	require.Equal(t, release.Released, out)
	// Someone else takes the unit; restore is then refused, and so is a late one.
	tb.book(t, booking.Actor{UserID: "bob", Role: booking.RoleUser}, res, at("12:00"))
	_, err = tb.e.Restore(ctx, alice, b.ID)
	require.ErrorIs(t, err, booking.ErrSlotFull)
	tb.clock.Advance(31 * time.Minute)
	_, err = tb.e.Restore(ctx, alice, b.ID)
	require.ErrorIs(t, err, booking.ErrRestoreWindowClosed)
}

func TestPaymentIsIdempotentPerPaymentID(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	h, err := tb.e.Hold(ctx, HoldRequest{UserID: "alice", ResourceID: res.ID, Start: at("16:00"), End: at("17:00")})
	require.NoError(t, err)
	_, err = tb.e.Pay(ctx, PaymentNotice{HoldID: h.ID, PaymentID: "p1", AmountCents: h.AmountCents + 1, PaidAt: tb.clock.Now()})
	require.ErrorIs(t, err, booking.ErrAmountMismatch)
	first, err := tb.e.Pay(ctx, PaymentNotice{HoldID: h.ID, PaymentID: "p1", AmountCents: h.AmountCents, PaidAt: tb.clock.Now()})
	require.NoError(t, err)
	require.Equal(t, OutcomeBooked, first.Outcome)
	again, err := tb.e.Pay(ctx, PaymentNotice{HoldID: h.ID, PaymentID: "p1", AmountCents: h.AmountCents, PaidAt: tb.clock.Now()})
	require.NoError(t, err)
	require.Equal(t, first.Booking.ID, again.Booking.ID)
	second, err := tb.e.Pay(ctx, PaymentNotice{HoldID: h.ID, PaymentID: "p2", AmountCents: h.AmountCents, PaidAt: tb.clock.Now()})
	require.NoError(t, err)
	require.Equal(t, OutcomeRefund, second.Outcome, "a second payment for a paid hold is refunded")
	var n int64
	require.NoError(t, tb.db.Gorm.Model(&models.Booking{}).Where("hold_id = ?", h.ID).Count(&n).Error)
	require.EqualValues(t, 1, n)
}

func TestFailureBetweenConfirmingAndCommit(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.HoldTTL = time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	start := at("17:00")
	h, err := tb.e.Hold(ctx, HoldRequest{UserID: "alice", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.NoError(t, err)

	// A failed commit puts the hold back on the wheel: it still expires on time.
	tb.e.hooks.beforeCommit = func(string) error { return errors.New("mysql went away") }
	_, err = tb.e.Confirm(ctx, alice, h.ID)
	require.Error(t, err)
	got, err := tb.e.GetHold(ctx, alice, h.ID)
	require.NoError(t, err)
	require.Equal(t, booking.HoldHeld, got.Status)
	tb.clock.Advance(time.Minute)
	require.True(t, tb.slotOf(t, res.ID, start).Available)

	// A crash at the same step: the hold stays CONFIRMING and off the wheel until reconciliation.
	h2, err := tb.e.Hold(ctx, HoldRequest{UserID: "alice", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.NoError(t, err)
	tb.e.hooks.beforeCommit = func(string) error { return errSimulatedCrash }
	_, err = tb.e.Confirm(ctx, alice, h2.ID)
	require.ErrorIs(t, err, errSimulatedCrash)
	tb.clock.Advance(2 * time.Minute)
	require.False(t, tb.slotOf(t, res.ID, start).Available, "a confirming hold cannot expire by the wheel")
	tb.restart(t)
	rep, err := tb.e.Reconcile(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.ConfirmingResumed)
	s := tb.slotOf(t, res.ID, start)
	require.True(t, s.Available, "start-up reconciliation gave the unit back")
	require.Equal(t, 1, s.Remaining)
	// No oversell afterwards.
	tb.book(t, booking.Actor{UserID: "bob", Role: booking.RoleUser}, res, start)
	_, err = tb.e.Hold(ctx, HoldRequest{UserID: "carol", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.ErrorIs(t, err, booking.ErrSlotFull)
}

func TestRedisLossRebuildsFromSQL(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 2, 60, "08:00", "22:00")
	var booked []booking.Booking
	for i := 0; i < 4; i++ {
		booked = append(booked, tb.book(t, booking.Actor{UserID: fmt.Sprintf("u%d", i), Role: booking.RoleUser}, res, at("18:00").Add(time.Duration(i/2)*time.Hour)))
	}
	_, err := tb.e.Hold(ctx, HoldRequest{UserID: "unpaid", ResourceID: res.ID, Start: at("20:00"), End: at("21:00")})
	require.NoError(t, err)

	// Redis loses everything this test wrote.
	tb.wipeRedis(t, res.VenueID)
	tb.restart(t)
	_, err = tb.e.Reconcile(ctx)
	require.NoError(t, err)
	for _, start := range []time.Time{at("18:00"), at("19:00")} {
		require.Equal(t, 2, tb.used(t, res.VenueID, res.ID, start), "confirmed bookings are counted again")
		_, err := tb.e.Hold(ctx, HoldRequest{UserID: "late", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
		require.ErrorIs(t, err, booking.ErrSlotFull, "no oversell after the rebuild")
	}
	for _, b := range booked {
		got, err := tb.e.GetBooking(ctx, booking.System, b.ID)
		require.NoError(t, err)
		require.Equal(t, booking.Confirmed, got.Status)
	}
	// Without a restart, a cold day is also rebuilt with its bookings before any hold sees it.
	tb.wipeRedis(t, res.VenueID)
	_, err = tb.e.Hold(ctx, HoldRequest{UserID: "late", ResourceID: res.ID, Start: at("18:00"), End: at("19:00")})
	require.ErrorIs(t, err, booking.ErrSlotFull)
}

// wipeRedis deletes every key of a venue, as FLUSHDB would (the Redis may be shared with other tests).
func (tb *testBundle) wipeRedis(t testing.TB, venueID uint64) {
	t.Helper()
	ctx := context.Background()
	keys, err := tb.redis.Client.Keys(ctx, tb.e.rs.Keys().VenuePattern(venueID)).Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	require.NoError(t, tb.redis.Client.Del(ctx, keys...).Err())
}

func TestDueReleasesFromIndex(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.ReleaseHorizon = time.Hour })
	ctx := context.Background()
	res := tb.resource(t, 5, 60, "08:00", "22:00")
	near := tb.book(t, alice, res, at("11:00"))
	far := tb.book(t, alice, res, at("16:00"))
	due, err := tb.e.DueReleases(ctx, tb.clock.Now().Add(2*time.Hour), 100)
	require.NoError(t, err)
	require.Len(t, due, 1, "only the booking released within the window")
	require.Equal(t, near.ID, due[0].BookingID)
	require.True(t, due[0].ReleaseAt.Equal(near.ReleaseAt))
	require.NoError(t, tb.e.MarkReleaseQueued(ctx, due[:1]))
	due, err = tb.e.DueReleases(ctx, at("20:00"), 100)
	require.NoError(t, err)
	require.Len(t, due, 1)
	require.Equal(t, far.ID, due[0].BookingID)
}

func TestWheelResolvesConfirmsADeadProcessLeft(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.HoldTTL = time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 2, 60, "08:00", "22:00")
	start := at("19:00")
	wheel := tb.e.NewLoops(LoopsConfig{})

	// Died before the commit: the hold goes back on the wheel and expires; its unit comes back.
	h1, err := tb.e.Hold(ctx, HoldRequest{UserID: "alice", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.NoError(t, err)
	tb.e.hooks.beforeCommit = func(string) error { return errSimulatedCrash }
	_, err = tb.e.Confirm(ctx, alice, h1.ID)
	require.ErrorIs(t, err, errSimulatedCrash)
	tb.e.hooks.beforeCommit = nil

	// Died after the commit: the booking is durable and the sweep settles the hold into it.
	h2, err := tb.e.Hold(ctx, HoldRequest{UserID: "alice", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.NoError(t, err)
	tb.e.hooks.afterCommit = func(string) error { return errSimulatedCrash }
	_, err = tb.e.Confirm(ctx, alice, h2.ID)
	require.ErrorIs(t, err, errSimulatedCrash)
	tb.e.hooks.afterCommit = nil
	b, ok, err := tb.e.ss.BookingByHold(ctx, h2.ID)
	require.NoError(t, err)
	require.True(t, ok, "the booking committed before the crash")

	tb.clock.Advance(2 * time.Minute)
	require.Equal(t, 2, tb.used(t, res.VenueID, res.ID, start), "both units stay taken while the holds are CONFIRMING")
	err = wheel.RunOnce(ctx)
	require.NoError(t, err)
	err = wheel.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, start), "the abandoned hold's unit is back; the booking's stays")
	got, err := tb.e.GetHold(ctx, alice, h2.ID)
	require.NoError(t, err)
	require.Equal(t, booking.HoldConfirmed, got.Status)
	require.Equal(t, b.ID, got.BookingID)
	owners, err := tb.redis.Client.HKeys(ctx, tb.e.rs.Keys().Venue(res.VenueID).Owners()).Result()
	require.NoError(t, err)
	require.Equal(t, []string{string(redisstore.BookingOwner(b.ID))}, owners)
	// Releasing the booking later gives its unit back too: nothing leaked.
	tb.clock.Set(b.ReleaseAt.UTC())
	_, err = tb.e.Release(ctx, release.Ref{BookingID: b.ID, ReleaseAt: b.ReleaseAt})
	require.NoError(t, err)
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, start))
}

func TestWaitlistPromotesFirstWaiterWhenUnitsFree(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	start := at("12:00")
	b := tb.book(t, alice, res, start)

	// The slot is taken: bob and carol wait, in that order.
	bob, err := tb.e.JoinWaitlist(ctx, WaitlistRequest{UserID: "bob", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, booking.WaitWaiting, bob.Status)
	carol, err := tb.e.JoinWaitlist(ctx, WaitlistRequest{UserID: "carol", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.NoError(t, err)
	_, err = tb.e.JoinWaitlist(ctx, WaitlistRequest{UserID: "dave", ResourceID: res.ID, Start: at("12:30"), End: at("13:30")})
	require.ErrorIs(t, err, booking.ErrOffGrid)
	_, err = tb.e.LeaveWaitlist(ctx, alice, carol.ID)
	require.ErrorIs(t, err, booking.ErrNotFound, "only the owner leaves")

	// Alice does not turn up: the release hands the unit to bob as a hold he can pay.
	tb.clock.Set(b.ReleaseAt.UTC())
	_, err = tb.e.Release(ctx, release.Ref{BookingID: b.ID, ReleaseAt: b.ReleaseAt})
	require.NoError(t, err)
	list, err := tb.e.ListWaitlist(ctx, booking.Actor{UserID: "bob", Role: booking.RoleUser})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, booking.WaitPromoted, list[0].Status)
	h, err := tb.e.GetHold(ctx, booking.Actor{UserID: "bob", Role: booking.RoleUser}, list[0].HoldID)
	require.NoError(t, err)
	require.Equal(t, booking.HoldHeld, h.Status)
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, start), "bob's hold took the unit, no more")
	got, err := tb.e.LeaveWaitlist(ctx, booking.Actor{UserID: "carol", Role: booking.RoleUser}, carol.ID)
	require.NoError(t, err)
	require.Equal(t, booking.WaitCancelled, got.Status)

	// Bob gives it up; nobody waits any more, so the unit is simply free.
	_, err = tb.e.CancelHold(ctx, booking.Actor{UserID: "bob", Role: booking.RoleUser}, h.ID)
	require.NoError(t, err)
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, start))
}

func TestWaitlistPromotedByTheWheelWhenAHoldExpires(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.HoldTTL = time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	start := at("14:00")
	_, err := tb.e.Hold(ctx, HoldRequest{UserID: "alice", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.NoError(t, err)
	entry, err := tb.e.JoinWaitlist(ctx, WaitlistRequest{UserID: "bob", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, booking.WaitWaiting, entry.Status)
	tb.clock.Advance(time.Minute)
	err = tb.e.NewLoops(LoopsConfig{}).RunOnce(ctx)
	require.NoError(t, err)
	list, err := tb.e.ListWaitlist(ctx, booking.Actor{UserID: "bob", Role: booking.RoleUser})
	require.NoError(t, err)
	require.Equal(t, booking.WaitPromoted, list[0].Status)
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, start))
}

func TestArrivedProgressesWithTheClock(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	staff := booking.Actor{UserID: "s", Role: booking.RoleStaff, VenueID: res.VenueID}
	b := tb.book(t, alice, res, at("11:00"))
	tb.clock.Set(at("10:45"))
	_, err := tb.e.CheckIn(ctx, staff, b.CheckinCode)
	require.NoError(t, err)
	wheel := tb.e.NewLoops(LoopsConfig{})
	status := func() booking.Status {
		err := wheel.RunOnce(ctx)
		require.NoError(t, err)
		got, err := tb.e.GetBooking(ctx, alice, b.ID)
		require.NoError(t, err)
		return got.Status
	}
	require.Equal(t, booking.Arrived, status())
	tb.clock.Set(at("11:00"))
	require.Equal(t, booking.InProgress, status(), "at its start")
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, at("11:00")))
	tb.clock.Set(at("12:00"))
	require.Equal(t, booking.Completed, status(), "at its end")
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, at("11:00")), "units back once it is over")
}

func TestPaidHoldReadableAfterRedisLoss(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	b := tb.book(t, alice, res, at("15:00"))
	tb.wipeRedis(t, res.VenueID)
	h, err := tb.e.GetHold(ctx, alice, b.HoldID)
	require.NoError(t, err)
	require.Equal(t, booking.HoldConfirmed, h.Status)
	require.Equal(t, b.ID, h.BookingID)
	_, err = tb.e.GetHold(ctx, booking.Actor{UserID: "mallory", Role: booking.RoleUser}, b.HoldID)
	require.ErrorIs(t, err, booking.ErrNotFound)
}

func TestPaymentAfterTheSlotEndedIsRefunded(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.HoldTTL = 5 * time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	tb.clock.Set(at("10:58"))
	h, err := tb.e.Hold(ctx, HoldRequest{UserID: "alice", ResourceID: res.ID, Start: at("10:00"), End: at("11:00")})
	require.NoError(t, err, "a slot in progress can be held")
	tb.clock.Set(at("11:01"))
	out, err := tb.e.Pay(ctx, PaymentNotice{HoldID: h.ID, PaymentID: "late", AmountCents: h.AmountCents, PaidAt: tb.clock.Now()})
	require.NoError(t, err)
	require.Equal(t, OutcomeRefund, out.Outcome, "the slot is over")
}
