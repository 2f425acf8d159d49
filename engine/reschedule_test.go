package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
	"github.com/slotwheel/slotwheel/models"
)

// ownerFields reads the slot fields Redis counts for an owner ("" when it has none).
func (tb *testBundle) ownerFields(t testing.TB, venueID uint64, owner redisstore.Owner) string {
	t.Helper()
	v, err := tb.redis.Client.HGet(context.Background(), tb.e.rs.Keys().Venue(venueID).Owners(), string(owner)).Result()
	if err != nil {
		return ""
	}
	parts := strings.Split(v, "|")
	return parts[1]
}

// A booking moves to another window: the new slot is taken and the old one freed in Redis, MySQL
// records the move with its history row and event, release_at follows the new start; the policy's
// count and cut-off, the price and a taken window refuse a move and change nothing.
func TestReschedule(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	_, err := tb.e.SetResourcePolicy(ctx, booking.System, res.ID, booking.PolicyInput{MaxReschedules: iptr(1), RescheduleCutoffMinutes: iptr(60)})
	require.NoError(t, err)
	b := tb.book(t, alice, res, at("14:00"))
	tb.book(t, booking.Actor{UserID: "bob", Role: booking.RoleUser}, res, at("16:00"))

	_, err = tb.e.Reschedule(ctx, booking.Actor{UserID: "bob", Role: booking.RoleUser}, RescheduleRequest{BookingID: b.ID, Start: at("15:00"), End: at("16:00")})
	require.ErrorIs(t, err, booking.ErrNotFound, "nobody moves what is not theirs")
	_, err = tb.e.Reschedule(ctx, alice, RescheduleRequest{BookingID: b.ID, Start: at("16:00"), End: at("17:00")})
	require.ErrorIs(t, err, booking.ErrSlotFull)
	moved, err := tb.e.Reschedule(ctx, alice, RescheduleRequest{BookingID: b.ID, Start: at("15:00"), End: at("16:00")})
	require.NoError(t, err)
	require.Equal(t, b.ID, moved.ID, "same booking")
	require.Equal(t, b.CheckinCode, moved.CheckinCode)
	require.True(t, moved.Start.Equal(at("15:00")))
	require.True(t, moved.ReleaseAt.Equal(at("15:15")))
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, at("14:00")), "the old window is free")
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, at("15:00")))
	require.Len(t, tb.events(t, booking.EventRescheduled), 1)
	h, err := tb.e.History(ctx, alice, b.ID)
	require.NoError(t, err)
	require.Equal(t, "rescheduled", h[len(h)-1].Reason)

	_, err = tb.e.Reschedule(ctx, alice, RescheduleRequest{BookingID: b.ID, Start: at("18:00"), End: at("19:00")})
	require.ErrorIs(t, err, booking.ErrRescheduleLimit)
	c := tb.book(t, alice, res, at("12:00"))
	tb.clock.Set(at("11:00"))
	_, err = tb.e.Reschedule(ctx, alice, RescheduleRequest{BookingID: c.ID, Start: at("18:00"), End: at("19:00")})
	require.ErrorIs(t, err, booking.ErrRescheduleClosed, "at the cut-off")

	// Another resource of the venue at another price: price_differs; at the same price it moves.
	dear, err := tb.e.CreateResource(ctx, booking.System, ResourceInput{VenueID: res.VenueID, Name: "Dear", Kind: "court", Capacity: 1, PriceCents: 5000})
	require.NoError(t, err)
	_, err = tb.e.SetSchedule(ctx, booking.System, dear.ID, booking.ScheduleInput{SlotMinutes: 60, HorizonDays: 7,
		Weekly: []booking.WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: "08:00", Close: "22:00"}}})
	require.NoError(t, err)
	d := tb.book(t, alice, res, at("19:00"))
	_, err = tb.e.Reschedule(ctx, alice, RescheduleRequest{BookingID: d.ID, ResourceID: dear.ID, Start: at("19:00"), End: at("20:00")})
	require.ErrorIs(t, err, booking.ErrPriceDiffers)
	twin := tb.resourceAt(t, res.VenueID, 1, 60, "08:00", "22:00")
	got, err := tb.e.Reschedule(ctx, alice, RescheduleRequest{BookingID: d.ID, ResourceID: twin.ID, Start: at("19:00"), End: at("20:00")})
	require.NoError(t, err)
	require.Equal(t, twin.ID, got.ResourceID)
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, at("19:00")))
	require.Equal(t, 1, tb.used(t, res.VenueID, twin.ID, at("19:00")))
}

// A move MySQL refuses leaves the booking on its old window, and a move left reserved by a process
// that died is ended by the sweep from what MySQL says: exactly one window either way.
func TestRescheduleFailureKeepsOneWindow(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	b := tb.book(t, alice, res, at("14:00"))
	owner := redisstore.BookingOwner(b.ID)
	oldFields := tb.ownerFields(t, res.VenueID, owner)

	// The booking changes between the reservation and the commit (an admin moved it meanwhile).
	tb.e.hooks.beforeMoveCommit = func() error {
		tb.e.hooks.beforeMoveCommit = nil
		_, _, err := tb.e.ss.UpdateBooking(ctx, b.ID, func(x *sqlstore.Booking) (booking.Change, error) {
			x.Reschedules = 0
			return booking.Change{From: booking.Confirmed, To: booking.Confirmed, At: tb.clock.Now(), Actor: "test", Reason: "touched"}, nil
		})
		return err
	}
	_, err := tb.e.Reschedule(ctx, alice, RescheduleRequest{BookingID: b.ID, Start: at("15:00"), End: at("16:00")})
	require.ErrorIs(t, err, booking.ErrInvalidTransition)
	require.Equal(t, oldFields, tb.ownerFields(t, res.VenueID, owner), "the old window stays")
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, at("14:00")))
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, at("15:00")), "the reservation came back")

	for _, committed := range []bool{false, true} {
		// A process dies right after reserving (crash) — with or without the commit.
		tb.e.hooks.beforeMoveCommit = func() error { return errSimulatedCrash }
		if committed {
			tb.e.hooks.beforeMoveCommit = nil
			tb.e.hooks.afterMoveCommit = func() error { return errSimulatedCrash }
		}
		cur, err := tb.e.GetBooking(ctx, alice, b.ID)
		require.NoError(t, err)
		to := at("15:00")
		if cur.Start.Equal(to) {
			to = at("17:00")
		}
		_, err = tb.e.Reschedule(ctx, alice, RescheduleRequest{BookingID: b.ID, Start: to, End: to.Add(time.Hour)})
		require.ErrorIs(t, err, errSimulatedCrash)
		tb.e.hooks.beforeMoveCommit, tb.e.hooks.afterMoveCommit = nil, nil
		require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, to), "reserved while the move is under way")
		tb.clock.Advance(tb.e.opts.ConfirmStaleAfter + time.Second)
		require.NoError(t, tb.e.NewLoops(LoopsConfig{}).Run(ctx, "wheel_sweep"))
		after, err := tb.e.GetBooking(ctx, alice, b.ID)
		require.NoError(t, err)
		require.Equal(t, committed, after.Start.Equal(to), "MySQL decides")
		for _, s := range []time.Time{cur.Start, to} {
			want := 0
			if s.Equal(after.Start) {
				want = 1
			}
			require.Equal(t, want, tb.used(t, res.VenueID, res.ID, s), "exactly the window MySQL has (%s)", s)
		}
		drift, _, err := tb.e.rs.Recount(ctx, res.VenueID)
		require.NoError(t, err)
		require.Zero(t, drift, "counters equal owners")
	}
}

// 1,000 goroutines move bookings between overlapping windows of a capacity-3 resource while others
// hold: no slot is ever over capacity, every booking holds exactly the window MySQL says, and the
// counters equal the owners.
func TestRescheduleRace(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.HoldTTL = time.Hour })
	ctx := context.Background()
	const capacity = 3
	res := tb.resource(t, capacity, 30, "08:00", "20:00") // 24 slots of 30 minutes
	_, err := tb.e.SetResourcePolicy(ctx, booking.System, res.ID, booking.PolicyInput{MaxReschedules: iptr(100)})
	require.NoError(t, err)
	first := at("08:00").AddDate(0, 0, 1)
	window := func(from int) (time.Time, time.Time) {
		s := first.Add(time.Duration(from) * 30 * time.Minute)
		return s, s.Add(90 * time.Minute) // three slots, overlapping its neighbours
	}
	var ids []uint64
	for i := range 11 {
		s, e := window(i * 2)
		b := tb.bookWindow(t, booking.Actor{UserID: fmt.Sprintf("u%d", i), Role: booking.RoleUser}, res, s, e)
		ids = append(ids, b.ID)
	}
	var wg sync.WaitGroup
	var moved, full sync.Map
	for g := range 1000 {
		wg.Go(func() {
			rng := rand.New(rand.NewSource(int64(g)))
			if g%4 == 0 { // others hold
				s, e := window(rng.Intn(22))
				_, err := tb.e.Hold(ctx, HoldRequest{UserID: fmt.Sprintf("h%d", g), ResourceID: res.ID, Start: s, End: e})
				if err != nil && !errors.Is(err, booking.ErrSlotFull) {
					t.Error(err)
				}
				return
			}
			i := rng.Intn(len(ids))
			s, e := window(rng.Intn(22))
			_, err := tb.e.Reschedule(ctx, booking.Actor{UserID: fmt.Sprintf("u%d", i), Role: booking.RoleUser}, RescheduleRequest{BookingID: ids[i], Start: s, End: e})
			switch {
			case err == nil:
				moved.Store(g, true)
			case errors.Is(err, booking.ErrSlotFull), errors.Is(err, booking.ErrConfirmInProgress), errors.Is(err, booking.ErrInvalidTransition):
				full.Store(g, true)
			default:
				t.Errorf("move %d: %v", g, err)
			}
		})
	}
	wg.Wait()
	n := 0
	moved.Range(func(any, any) bool { n++; return true })
	require.Greater(t, n, 0, "some moves succeeded")

	var rows []models.Booking
	require.NoError(t, tb.db.Gorm.Where("id IN ?", ids).Find(&rows).Error)
	count := map[string]int{}
	for _, r := range rows {
		require.Equal(t, r.Slots, tb.ownerFields(t, res.VenueID, redisstore.BookingOwner(r.ID)), "booking %d holds exactly its window", r.ID)
		for _, f := range strings.Split(r.Slots, ",") {
			count[f]++
		}
	}
	moves, err := tb.e.rs.PendingMoves(ctx, res.VenueID)
	require.NoError(t, err)
	require.Empty(t, moves, "no move left reserved")
	for s := range 24 {
		slot := first.Add(time.Duration(s) * 30 * time.Minute)
		used := tb.used(t, res.VenueID, res.ID, slot)
		require.LessOrEqual(t, used, capacity, "slot %d over capacity", s)
		require.GreaterOrEqual(t, used, count[redisstore.SlotField(res.ID, slot.Unix()/60)], "slot %d counts every booking on it", s)
	}
	drift, _, err := tb.e.rs.Recount(ctx, res.VenueID)
	require.NoError(t, err)
	require.Zero(t, drift, "counters equal owners")
}

// bookWindow holds and confirms start..end for a.
func (tb *testBundle) bookWindow(t testing.TB, a booking.Actor, res Resource, start, end time.Time) booking.Booking {
	t.Helper()
	ctx := context.Background()
	h, err := tb.e.Hold(ctx, HoldRequest{UserID: a.UserID, ResourceID: res.ID, Start: start, End: end})
	require.NoError(t, err)
	b, err := tb.e.Confirm(ctx, a, h.ID)
	require.NoError(t, err)
	return b
}
