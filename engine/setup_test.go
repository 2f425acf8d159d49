package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/testenv"
)

// testBundle is one test's engine on its own backends, with a simulated clock.
type testBundle struct {
	e     *Engine
	clock *clock.Simulated
	redis *testenv.Redis
	db    *testenv.DB
	opts  Options
}

// monday10 is a Monday, 10:00 in Shanghai: inside every test schedule's opening hours.
var monday10 = time.Date(2026, 12, 7, 10, 0, 0, 0, shanghai)

var shanghai = mustLoc("Asia/Shanghai")

func mustLoc(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

func setup(t testing.TB, mutate ...func(*Options)) *testBundle {
	t.Helper()
	r := testenv.NewRedis(t)
	db := testenv.NewDB(t)
	clk := clock.NewSimulated(monday10)
	opts := Options{DB: db.Gorm, Redis: r.Client, Prefix: r.Prefix, Clock: clk}
	for _, m := range mutate {
		m(&opts)
	}
	e, err := New(opts)
	require.NoError(t, err)
	return &testBundle{e: e, clock: clk, redis: r, db: db, opts: opts}
}

// restart builds a new engine on the same backends, as a restarted process would.
func (tb *testBundle) restart(t testing.TB) {
	e, err := New(tb.opts)
	require.NoError(t, err)
	tb.e = e
}

// resource creates a venue (first call) and a resource open every day between open and close.
func (tb *testBundle) resource(t testing.TB, capacity, slotMinutes int, open, close string) Resource {
	t.Helper()
	ctx := context.Background()
	v, err := tb.e.CreateVenue(ctx, booking.System, VenueInput{Name: "Venue", Timezone: "Asia/Shanghai"})
	require.NoError(t, err)
	return tb.resourceAt(t, v.ID, capacity, slotMinutes, open, close)
}

func (tb *testBundle) resourceAt(t testing.TB, venueID uint64, capacity, slotMinutes int, open, close string) Resource {
	t.Helper()
	ctx := context.Background()
	r, err := tb.e.CreateResource(ctx, booking.System, ResourceInput{VenueID: venueID, Name: "R", Kind: "court", Capacity: capacity,
		Category: "court", PriceCents: 1000})
	require.NoError(t, err)
	_, err = tb.e.SetSchedule(ctx, booking.System, r.ID, booking.ScheduleInput{SlotMinutes: slotMinutes, HorizonDays: 7,
		Weekly: []booking.WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: open, Close: close}}})
	require.NoError(t, err)
	return r
}

// at is a Shanghai wall time on the test Monday.
func at(hhmm string) time.Time {
	var h, m int
	_, err := fmt.Sscanf(hhmm, "%d:%d", &h, &m)
	if err != nil {
		panic(err)
	}
	return time.Date(2026, 12, 7, h, m, 0, 0, shanghai)
}

// used reads the units taken of one slot from Redis.
func (tb *testBundle) used(t testing.TB, venueID, resourceID uint64, start time.Time) int {
	t.Helper()
	n, err := tb.usedErr(venueID, resourceID, start)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// usedErr is used for a condition polled off the test's goroutine, which must not fail the test.
func (tb *testBundle) usedErr(venueID, resourceID uint64, start time.Time) (int, error) {
	n, err := tb.redis.Client.HGet(context.Background(), tb.e.rs.Keys().Venue(venueID).Used(), redisstore.SlotField(resourceID, start.Unix()/60)).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil // no unit taken
	}
	return n, err
}

// releaseTask runs b's release task as the queue would deliver it, and answers its outcome.
func (tb *testBundle) releaseTask(t testing.TB, b booking.Booking) release.Outcome {
	t.Helper()
	out, err := tb.e.Release(context.Background(), release.Ref{BookingID: b.ID, ReleaseAt: b.ReleaseAt})
	require.NoError(t, err)
	return out
}

func (tb *testBundle) slotOf(t testing.TB, resourceID uint64, start time.Time) SlotAvailability {
	t.Helper()
	slots, err := tb.e.Availability(context.Background(), AvailabilityQuery{ResourceID: resourceID, Date: start.In(shanghai).Format(booking.DayLayout)})
	require.NoError(t, err)
	for _, s := range slots {
		if s.Start.Equal(start) {
			return s
		}
	}
	t.Fatalf("no slot at %s", start)
	return SlotAvailability{}
}

// racingCheckIns starts, for each of bs, a check-in at the front desk of another instance whose
// clock reads a millisecond before releaseAt (the releasing instance reads it at releaseAt); each
// waits for gate, so that the check-ins race a release.
func (tb *testBundle) racingCheckIns(t *testing.T, venueID uint64, releaseAt time.Time, bs []booking.Booking, gate <-chan struct{}, wg *sync.WaitGroup) {
	t.Helper()
	deskOpts := tb.opts
	deskOpts.Clock = clock.NewSimulated(releaseAt.Add(-time.Millisecond))
	desk, err := New(deskOpts)
	require.NoError(t, err)
	staff := booking.Actor{UserID: "desk", Role: booking.RoleStaff, VenueID: venueID}
	for _, b := range bs {
		wg.Go(func() {
			<-gate
			_, err := desk.CheckIn(context.Background(), staff, b.CheckinCode)
			assert.NoError(t, err, "check-in of booking %d before release_at", b.ID)
		})
	}
}
