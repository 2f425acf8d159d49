package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// counselling is a venue with counsellors and rooms (capacity 1 each, 30-minute slots) and a 50-minute
// session that needs one of each, with 10-minute buffers around it.
func (tb *testBundle) counselling(t testing.TB, counsellors, rooms int) (Service, []Resource, []Resource) {
	t.Helper()
	ctx := context.Background()
	v, err := tb.e.CreateVenue(ctx, booking.System, VenueInput{Name: "Clinic", Timezone: "Asia/Shanghai"})
	require.NoError(t, err)
	mk := func(n int) ([]Resource, []uint64) {
		var rs []Resource
		var ids []uint64
		for range n {
			r := tb.resourceAt(t, v.ID, 1, 10, "08:00", "22:00")
			rs, ids = append(rs, r), append(ids, r.ID)
		}
		return rs, ids
	}
	cs, cids := mk(counsellors)
	rs, rids := mk(rooms)
	svc, err := tb.e.CreateService(ctx, booking.System, ServiceInput{VenueID: v.ID, Name: "Session", DurationMinutes: 50,
		PrepMinutes: 10, CleanupMinutes: 10, PriceCents: 30000,
		Roles: []ServiceRole{{Role: "counsellor", ResourceIDs: cids}, {Role: "room", ResourceIDs: rids}}})
	require.NoError(t, err)
	return svc, cs, rs
}

// A session takes a counsellor and a room in one step: the first of each with room (or the one
// named), both or neither; its booking keeps both, and gives both back.
func TestServiceWithRoles(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	svc, cs, rs := tb.counselling(t, 2, 1)
	require.Len(t, svc.Roles, 2)
	_, err := tb.e.CreateService(ctx, booking.System, ServiceInput{VenueID: svc.VenueID, Name: "Bad", DurationMinutes: 50,
		Roles: []ServiceRole{{Role: "a", ResourceIDs: []uint64{cs[0].ID}}, {Role: "b", ResourceIDs: []uint64{cs[0].ID}}}})
	require.ErrorIs(t, err, booking.Invalid("invalid_resource_ids", ""), "a resource fills one role only")

	h, err := tb.e.Hold(ctx, HoldRequest{UserID: "alice", ServiceID: svc.ID, Start: at("14:00")})
	require.NoError(t, err)
	require.Equal(t, []booking.RoleResource{{Role: "counsellor", ResourceID: cs[0].ID}, {Role: "room", ResourceID: rs[0].ID}}, h.Roles)
	require.Equal(t, cs[0].ID, h.ResourceID)
	for _, r := range []Resource{cs[0], rs[0]} {
		require.Equal(t, 1, tb.used(t, r.VenueID, r.ID, at("13:50")), "the preparation buffer is taken on %d", r.ID)
		require.Equal(t, 1, tb.used(t, r.VenueID, r.ID, at("14:50")), "the clean-up buffer too")
	}
	// The second counsellor is free, but the only room is not: nothing is taken.
	_, err = tb.e.Hold(ctx, HoldRequest{UserID: "bob", ServiceID: svc.ID, Start: at("14:00")})
	require.ErrorIs(t, err, booking.ErrSlotFull)
	require.Equal(t, 0, tb.used(t, cs[1].VenueID, cs[1].ID, at("14:00")), "no counsellor without a room")
	slots, err := tb.e.Availability(ctx, AvailabilityQuery{ServiceID: svc.ID, Date: "2026-12-07"})
	require.NoError(t, err)
	for _, s := range slots {
		switch s.Start.Format("15:04") {
		case "14:00":
			require.False(t, s.Available)
			require.Equal(t, booking.ReasonFull, s.Reason)
		case "18:00":
			require.True(t, s.Available)
			require.Equal(t, 1, s.Remaining, "one room")
		}
	}

	// A named counsellor.
	h2, err := tb.e.Hold(ctx, HoldRequest{UserID: "carol", ServiceID: svc.ID, Start: at("16:00"), Resources: map[string]uint64{"counsellor": cs[1].ID}})
	require.NoError(t, err)
	require.Equal(t, cs[1].ID, h2.Roles[0].ResourceID)
	_, err = tb.e.Hold(ctx, HoldRequest{UserID: "carol", ServiceID: svc.ID, Start: at("16:00"), Resources: map[string]uint64{"chef": cs[1].ID}})
	require.ErrorIs(t, err, booking.Invalid("invalid_resources", ""))

	b, err := tb.e.Confirm(ctx, alice, h.ID)
	require.NoError(t, err)
	require.Equal(t, h.Roles, b.Roles, "the booking keeps its resources")
	got, err := tb.e.GetBooking(ctx, alice, b.ID)
	require.NoError(t, err)
	require.Equal(t, h.Roles, got.Roles)
	_, err = tb.e.CancelBooking(ctx, booking.System, b.ID)
	require.NoError(t, err)
	for _, r := range []Resource{cs[0], rs[0]} {
		require.Equal(t, 0, tb.used(t, r.VenueID, r.ID, at("14:00")), "both come back")
	}

	// Redis loses the venue: the room's day reloads with the booking's units on it.
	c := tb.counsellingBooking(t, svc, at("19:00"))
	tb.wipeRedis(t, svc.VenueID)
	_, err = tb.e.Availability(ctx, AvailabilityQuery{ResourceID: rs[0].ID, Date: "2026-12-07"})
	require.NoError(t, err)
	require.Equal(t, 1, tb.used(t, rs[0].VenueID, rs[0].ID, at("19:00")), "a booking of several resources counts on each")
	_, err = tb.e.Reschedule(ctx, alice, RescheduleRequest{BookingID: c.ID, Start: at("20:00")})
	require.NoError(t, err)
	for _, r := range []Resource{cs[0], rs[0]} {
		require.Equal(t, 0, tb.used(t, r.VenueID, r.ID, at("19:00")), "moved off 19:00 on %d", r.ID)
		require.Equal(t, 1, tb.used(t, r.VenueID, r.ID, at("20:00")), "moved to 20:00 on %d", r.ID)
	}
}

func (tb *testBundle) counsellingBooking(t testing.TB, svc Service, start time.Time) booking.Booking {
	t.Helper()
	ctx := context.Background()
	h, err := tb.e.Hold(ctx, HoldRequest{UserID: "alice", ServiceID: svc.ID, Start: start})
	require.NoError(t, err)
	b, err := tb.e.Confirm(ctx, alice, h.ID)
	require.NoError(t, err)
	return b
}

// 1,000 racing holds of a two-role session: never a counsellor without a room or the reverse, never
// over capacity, and exactly as many holds as the scarcer role allows.
func TestServiceWithRolesRace(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.HoldTTL = time.Hour })
	ctx := context.Background()
	svc, cs, rs := tb.counselling(t, 3, 2)
	starts := []time.Time{at("14:00"), at("15:10"), at("16:20")} // physical windows 13:50–15:00, 15:00–16:10, …
	var ok, full atomic.Int64
	var wg sync.WaitGroup
	for i := range 1000 {
		wg.Go(func() {
			_, err := tb.e.Hold(ctx, HoldRequest{UserID: fmt.Sprintf("u%d", i), ServiceID: svc.ID, Start: starts[i%len(starts)]})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, booking.ErrSlotFull):
				full.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 2*len(starts), ok.Load(), "two rooms per start")
	for _, s := range starts {
		var counsellors, rooms int
		for _, c := range cs {
			n := tb.used(t, c.VenueID, c.ID, s)
			require.LessOrEqual(t, n, 1)
			counsellors += n
		}
		for _, r := range rs {
			n := tb.used(t, r.VenueID, r.ID, s)
			require.LessOrEqual(t, n, 1)
			rooms += n
		}
		require.Equal(t, rooms, counsellors, "at %s: every session has one of each", s.Format("15:04"))
	}
	drift, _, err := tb.e.rs.Recount(ctx, svc.VenueID)
	require.NoError(t, err)
	require.Zero(t, drift, "counters equal owners")
}
