package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/models"
)

func TestHoldRaceForLastUnits(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 10, 60, "08:00", "22:00")
	start := at("14:00")
	tb.slotOf(t, res.ID, start) // the catalog and the day loaded: what races is the hold script
	const racers = 10000
	var ok, full atomic.Int64
	var other sync.Map
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := 0; i < racers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-gate
			_, err := tb.e.Hold(ctx, HoldRequest{UserID: fmt.Sprintf("u%d", i), ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, booking.ErrSlotFull):
				full.Add(1)
			default:
				other.Store(i, err)
			}
		}(i)
	}
	close(gate)
	wg.Wait()
	other.Range(func(k, v any) bool { t.Errorf("racer %v: %v", k, v); return false })
	require.EqualValues(t, 10, ok.Load(), "exactly capacity holds succeed")
	require.EqualValues(t, racers-10, full.Load())
	require.Equal(t, 10, tb.used(t, res.VenueID, res.ID, start))
	s := tb.slotOf(t, res.ID, start)
	require.False(t, s.Available)
	require.Equal(t, booking.ReasonFull, s.Reason)
}

func TestRandomOverlappingWindowsNeverOversell(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	const capacity = 3
	res := tb.resource(t, capacity, 30, "08:00", "20:00") // 24 slots
	first := at("08:00").AddDate(0, 0, 1)                 // tomorrow: every slot is in the future
	type held struct{ from, n int }
	var mu sync.Mutex
	var holds []held
	var wg sync.WaitGroup
	for g := 0; g < 40; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			for i := 0; i < 25; i++ {
				from := rng.Intn(24 - 6 + 1)
				start := first.Add(time.Duration(from) * 30 * time.Minute)
				_, err := tb.e.Hold(ctx, HoldRequest{UserID: fmt.Sprintf("g%d", g), ResourceID: res.ID, Start: start, End: start.Add(3 * time.Hour)})
				if err == nil {
					mu.Lock()
					holds = append(holds, held{from, 6})
					mu.Unlock()
				} else if !errors.Is(err, booking.ErrSlotFull) {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	require.NotEmpty(t, holds)
	for s := 0; s < 24; s++ {
		covering := 0
		for _, h := range holds {
			if s >= h.from && s < h.from+h.n {
				covering++
			}
		}
		got := tb.used(t, res.VenueID, res.ID, first.Add(time.Duration(s)*30*time.Minute))
		require.LessOrEqual(t, got, capacity, "slot %d above capacity", s)
		require.Equal(t, covering, got, "slot %d counter differs from the holds covering it", s)
	}
}

// A service whose duration is not a whole number of its resource's slots is refused (422
// invalid_duration), and so is a grid that a service already delivered on the resource would end
// off (422 invalid_slot_minutes, naming it); nothing is written.
func TestServiceDurationOnTheGrid(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	hourly := tb.resource(t, 1, 60, "08:00", "20:00")
	_, err := tb.e.CreateService(ctx, booking.System, ServiceInput{VenueID: hourly.VenueID, Name: "Counselling", DurationMinutes: 50,
		ResourceIDs: []uint64{hourly.ID}, PriceCents: 30000})
	require.ErrorIs(t, err, booking.Invalid("invalid_duration", ""))
	svcs, err := tb.e.ListServices(ctx, hourly.VenueID)
	require.NoError(t, err)
	require.Empty(t, svcs)

	fine := tb.resourceAt(t, hourly.VenueID, 1, 10, "08:00", "20:00")
	_, err = tb.e.CreateService(ctx, booking.System, ServiceInput{VenueID: hourly.VenueID, Name: "Counselling", DurationMinutes: 50,
		ResourceIDs: []uint64{hourly.ID, fine.ID}, PriceCents: 30000})
	require.ErrorIs(t, err, booking.Invalid("invalid_duration", ""), "one resource off the grid is enough")
	svc, err := tb.e.CreateService(ctx, booking.System, ServiceInput{VenueID: hourly.VenueID, Name: "Counselling", DurationMinutes: 50,
		ResourceIDs: []uint64{fine.ID}, PriceCents: 30000})
	require.NoError(t, err)
	_, err = tb.e.SetSchedule(ctx, booking.System, fine.ID, booking.ScheduleInput{SlotMinutes: 30,
		Weekly: []booking.WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: "08:00", Close: "20:00"}}, HorizonDays: 14})
	require.ErrorIs(t, err, booking.Invalid("invalid_slot_minutes", ""))
	e, _ := booking.AsError(err)
	require.Equal(t, []string{strconv.FormatUint(svc.ID, 10)}, e.Details["service_ids"])
	_, err = tb.e.SetSchedule(ctx, booking.System, fine.ID, booking.ScheduleInput{SlotMinutes: 25,
		Weekly: []booking.WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: "08:00", Close: "20:00"}}, HorizonDays: 14})
	require.NoError(t, err, "50 minutes are two slots of 25")
}

func TestCounsellingBuffersComparePhysicalWindows(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 5, "08:00", "20:00")
	svc, err := tb.e.CreateService(ctx, booking.System, ServiceInput{VenueID: res.VenueID, Name: "Counselling", DurationMinutes: 50,
		PrepMinutes: 15, CleanupMinutes: 15, ResourceIDs: []uint64{res.ID}, PriceCents: 30000})
	require.NoError(t, err)
	h, err := tb.e.Hold(ctx, HoldRequest{UserID: "a", ServiceID: svc.ID, ResourceID: res.ID, Start: at("14:00")})
	require.NoError(t, err)
	require.True(t, h.OccupyStart.Equal(at("13:45")), "occupies from %s", h.OccupyStart)
	require.True(t, h.OccupyEnd.Equal(at("15:05")), "occupies until %s", h.OccupyEnd)
	require.True(t, h.End.Equal(at("14:50")))
	require.EqualValues(t, 30000, h.AmountCents)
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, at("13:45")))
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, at("15:00")))
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, at("15:05")))
	// Availability of the service says why 12:50 (customer 12:50–13:40, window 12:35–13:55) is not offered.
	slots, err := tb.e.Availability(ctx, AvailabilityQuery{ServiceID: svc.ID, Date: "2026-12-07"})
	require.NoError(t, err)
	reasons := map[string]string{}
	for _, s := range slots {
		reasons[s.Start.Format("15:04")] = s.Reason
	}
	require.Equal(t, booking.ReasonFull, reasons["14:00"])
	require.Equal(t, booking.ReasonBufferConflict, reasons["12:50"], "its clean-up buffer meets the booked preparation")
	for _, c := range []struct {
		start string
		ok    bool
	}{{"15:00", false}, {"15:15", false}, {"12:45", false}, {"15:20", true}, {"12:40", true}} {
		_, err := tb.e.Hold(ctx, HoldRequest{UserID: "b" + c.start, ServiceID: svc.ID, ResourceID: res.ID, Start: at(c.start)})
		if c.ok {
			require.NoError(t, err, "session at %s only touches 13:45–15:05", c.start)
		} else {
			require.ErrorIs(t, err, booking.ErrSlotFull, "session at %s overlaps 13:45–15:05", c.start)
		}
	}
}

func TestHoldValidation(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 2, 90, "08:30", "22:00")
	cases := []struct {
		name string
		req  HoldRequest
		want error
	}{
		{"off grid", HoldRequest{ResourceID: res.ID, Start: at("09:00"), End: at("10:30")}, booking.ErrOffGrid},
		{"end off grid", HoldRequest{ResourceID: res.ID, Start: at("11:30"), End: at("12:30")}, booking.ErrOffGrid},
		{"past", HoldRequest{ResourceID: res.ID, Start: at("07:00").Add(-24 * time.Hour), End: at("08:30").Add(-24 * time.Hour)}, booking.ErrSlotPast},
		{"ended slot today", HoldRequest{ResourceID: res.ID, Start: at("08:30"), End: at("10:00")}, booking.ErrSlotPast},
		{"closed", HoldRequest{ResourceID: res.ID, Start: at("22:00"), End: at("23:30")}, booking.ErrSlotClosed},
		{"too far", HoldRequest{ResourceID: res.ID, Start: at("08:30").AddDate(0, 0, 30), End: at("10:00").AddDate(0, 0, 30)}, booking.ErrTooFar},
		{"quantity above capacity", HoldRequest{ResourceID: res.ID, Start: at("11:30"), End: at("13:00"), Quantity: 3}, booking.Invalid("invalid_quantity", "")},
		{"end before start", HoldRequest{ResourceID: res.ID, Start: at("13:00"), End: at("11:30")}, booking.Invalid("invalid_window", "")},
		{"unknown resource", HoldRequest{ResourceID: 999999, Start: at("11:30"), End: at("13:00")}, booking.Invalid("unknown_resource", "")},
	}
	for _, c := range cases {
		c.req.UserID = "u"
		_, err := tb.e.Hold(ctx, c.req)
		require.ErrorIs(t, err, c.want, c.name)
	}
	// A slot in progress can still be held.
	_, err := tb.e.Hold(ctx, HoldRequest{UserID: "u", ResourceID: res.ID, Start: at("08:30").Add(90 * time.Minute), End: at("11:30")})
	require.NoError(t, err, "10:00–11:30 is in progress at 10:00 and can be held")
}

func TestHoldExpiresAtItsDeadline(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.HoldTTL = 2 * time.Second })
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	start := at("15:00")
	h, err := tb.e.Hold(ctx, HoldRequest{UserID: "a", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.NoError(t, err)
	require.True(t, h.ExpiresAt.Equal(monday10.Add(2*time.Second)))
	require.False(t, tb.slotOf(t, res.ID, start).Available)

	tb.clock.Advance(2*time.Second - time.Millisecond)
	require.False(t, tb.slotOf(t, res.ID, start).Available, "a millisecond before its deadline the hold still occupies")
	got, err := tb.e.GetHold(ctx, booking.Actor{UserID: "a", Role: booking.RoleUser}, h.ID)
	require.NoError(t, err)
	require.Equal(t, booking.HoldHeld, got.Status)

	tb.clock.Advance(time.Millisecond)
	s := tb.slotOf(t, res.ID, start)
	require.True(t, s.Available, "at the deadline the unit is free, without waiting for a tick")
	require.Equal(t, 1, s.Remaining)
	got, err = tb.e.GetHold(ctx, booking.Actor{UserID: "a", Role: booking.RoleUser}, h.ID)
	require.NoError(t, err)
	require.Equal(t, booking.HoldExpired, got.Status, "the record stays readable after it ends")

	// The ticker restores the counter of a hold nobody read.
	h2, err := tb.e.Hold(ctx, HoldRequest{UserID: "b", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, start))
	tb.clock.Advance(2 * time.Second)
	require.NoError(t, tb.e.NewLoops(LoopsConfig{}).Run(ctx, "wheel_sweep"))
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, start))

	// Confirming after expiry re-takes the units while they are free...
	b, err := tb.e.Confirm(ctx, booking.Actor{UserID: "b", Role: booking.RoleUser}, h2.ID)
	require.NoError(t, err)
	require.Equal(t, booking.Confirmed, b.Status)
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, start))
	// ...and fails clearly when someone else took them.
	tb.clock.Advance(2 * time.Second)
	other := start.Add(time.Hour)
	h3, err := tb.e.Hold(ctx, HoldRequest{UserID: "c", ResourceID: res.ID, Start: other, End: other.Add(time.Hour)})
	require.NoError(t, err)
	tb.clock.Advance(3 * time.Second)
	_, err = tb.e.Hold(ctx, HoldRequest{UserID: "d", ResourceID: res.ID, Start: other, End: other.Add(time.Hour)})
	require.NoError(t, err)
	_, err = tb.e.Confirm(ctx, booking.Actor{UserID: "c", Role: booking.RoleUser}, h3.ID)
	require.ErrorIs(t, err, booking.ErrHoldExpired)
	// A payment for it is recorded for refund, answered 2xx-worthy.
	res3, err := tb.e.Pay(ctx, PaymentNotice{HoldID: h3.ID, PaymentID: "p-late", AmountCents: h3.AmountCents, PaidAt: tb.clock.Now()})
	require.NoError(t, err)
	require.Equal(t, OutcomeRefund, res3.Outcome)
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, other), "the refund took nothing")
}

func TestScheduleChangeMovesUnitsOntoTheNewGrid(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 3, 60, "08:00", "22:00")
	start := at("16:00")
	tb.book(t, alice, res, start) // 16:00–17:00
	h, err := tb.e.Hold(ctx, HoldRequest{UserID: "bob", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.NoError(t, err)

	_, err = tb.e.SetSchedule(ctx, booking.System, res.ID, booking.ScheduleInput{SlotMinutes: 30, HorizonDays: 7,
		Weekly: []booking.WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: "08:00", Close: "22:00"}}})
	require.NoError(t, err)
	for _, half := range []time.Time{start, start.Add(30 * time.Minute)} {
		s := tb.slotOf(t, res.ID, half)
		require.Equal(t, 1, s.Remaining, "the booking and the hold still take both halves of %s", half.Format("15:04"))
	}
	_, err = tb.e.Hold(ctx, HoldRequest{UserID: "c", ResourceID: res.ID, Start: start.Add(30 * time.Minute), End: start.Add(time.Hour)})
	require.NoError(t, err)
	_, err = tb.e.Hold(ctx, HoldRequest{UserID: "d", ResourceID: res.ID, Start: start.Add(30 * time.Minute), End: start.Add(time.Hour)})
	require.ErrorIs(t, err, booking.ErrSlotFull, "no oversell on the new grid")
	// The hold's record follows the grid too: giving it up frees the new slots.
	_, err = tb.e.CancelHold(ctx, booking.Actor{UserID: "bob", Role: booking.RoleUser}, h.ID)
	require.NoError(t, err)
	require.Equal(t, 2, tb.slotOf(t, res.ID, start).Remaining)

	// A grid under which booked units would not fit is refused.
	for _, u := range []string{"e", "f", "g"} {
		tb.book(t, booking.Actor{UserID: u, Role: booking.RoleUser}, res, at("17:00")) // with alice's, four bookings in 16:00–18:00
	}
	_, err = tb.e.SetSchedule(ctx, booking.System, res.ID, booking.ScheduleInput{SlotMinutes: 120, HorizonDays: 7,
		Weekly: []booking.WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: "08:00", Close: "22:00"}}})
	require.ErrorIs(t, err, booking.ErrScheduleConflict)
}

func TestScheduleChangeCountsLiveHolds(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	weekly := []booking.WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: "08:00", Close: "22:00"}}
	h, err := tb.e.Hold(ctx, HoldRequest{UserID: "c2", ResourceID: res.ID, Start: at("18:00"), End: at("19:00")})
	require.NoError(t, err)
	tb.book(t, alice, res, at("19:00"))

	// A coarser grid would put the hold and the booking in one slot of capacity 1.
	_, err = tb.e.SetSchedule(ctx, booking.System, res.ID, booking.ScheduleInput{SlotMinutes: 120, HorizonDays: 7, Weekly: weekly})
	require.ErrorIs(t, err, booking.ErrScheduleConflict, "live holds count")

	// Confirming the hold later still finds its unit on the grid it was made on.
	s := tb.slotOf(t, res.ID, at("18:00"))
	require.False(t, s.Available, "the hold still takes 18:00")
	b, err := tb.e.Confirm(ctx, booking.Actor{UserID: "c2", Role: booking.RoleUser}, h.ID)
	require.NoError(t, err)
	require.NotEmpty(t, b.ID)
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, at("18:00")))
}

// Closing hours under confirmed bookings is refused with the bookings named, unless the change asks
// for them to be cancelled as an admin cancels them; unpaid holds on those hours are given up.
func TestClosingHoursUnderBookings(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	weekly := []booking.WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: "08:00", Close: "22:00"}}
	h, err := tb.e.Hold(ctx, HoldRequest{UserID: "c2", ResourceID: res.ID, Start: at("18:00"), End: at("19:00")})
	require.NoError(t, err)
	b := tb.book(t, alice, res, at("19:00"))
	closed := booking.ScheduleInput{SlotMinutes: 60, HorizonDays: 7, Weekly: weekly, Exceptions: []booking.ScheduleException{{Date: "2026-12-07", Closed: true}}}
	shorter := booking.ScheduleInput{SlotMinutes: 60, HorizonDays: 7, Weekly: []booking.WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: "08:00", Close: "19:00"}}}

	for _, in := range []booking.ScheduleInput{closed, shorter} {
		_, err = tb.e.SetSchedule(ctx, booking.System, res.ID, in)
		require.ErrorIs(t, err, booking.ErrScheduleConflict)
		e, ok := booking.AsError(err)
		require.True(t, ok)
		require.Equal(t, []string{strconv.FormatUint(b.ID, 10)}, e.Details["booking_ids"], "the conflict names the booking")
		got, err := tb.e.GetBooking(ctx, alice, b.ID)
		require.NoError(t, err)
		require.Equal(t, booking.Confirmed, got.Status, "a refused change changes nothing")
		require.False(t, tb.slotOf(t, res.ID, at("19:00")).Available)
	}

	_, err = tb.e.ChangeSchedule(ctx, booking.System, res.ID, ScheduleChange{ScheduleInput: closed, CancelAffected: true})
	require.NoError(t, err)
	got, err := tb.e.GetBooking(ctx, alice, b.ID)
	require.NoError(t, err)
	require.Equal(t, booking.CancelledByAdmin, got.Status, "cancelled as an admin cancels")
	hold, err := tb.e.GetHold(ctx, booking.Actor{UserID: "c2", Role: booking.RoleUser}, h.ID)
	require.NoError(t, err)
	require.Equal(t, booking.HoldCancelled, hold.Status, "an unpaid hold on closed hours is given up")
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, at("18:00")))
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, at("19:00")))
	var n int64
	require.NoError(t, tb.db.Gorm.Model(&models.OutboxEvent{}).Where("type = ? AND subject = ?", "booking.cancelled", "booking:"+strconv.FormatUint(b.ID, 10)).Count(&n).Error)
	require.EqualValues(t, 1, n, "the cancellation is announced")

	// Reopened, both hours are free again.
	_, err = tb.e.SetSchedule(ctx, booking.System, res.ID, booking.ScheduleInput{SlotMinutes: 60, HorizonDays: 7, Weekly: weekly})
	require.NoError(t, err)
	_, err = tb.e.Hold(ctx, HoldRequest{UserID: "c3", ResourceID: res.ID, Start: at("18:00"), End: at("20:00")})
	require.NoError(t, err)
}
