package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/internal/testenv"
)

// testBundle is one test's backends, engine and Jobs, all isolated: its own database, key prefix
// and queue names.
type testBundle struct {
	db        *testenv.DB
	redis     *testenv.Redis
	redisOpt  asynq.RedisConnOpt
	eng       *engine.Engine
	jobs      *Jobs
	inspector *asynq.Inspector
}

// testConfig is what a test changes of the defaults.
type testConfig struct {
	engine engine.Options // DB, Redis, Prefix and Scheduler are filled in
	jobs   Options        // Redis, Engine, Queue and Logger are filled in
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func setup(t testing.TB, cfg testConfig) *testBundle {
	t.Helper()
	db := testenv.NewDB(t)
	r := testenv.NewRedis(t)
	redisOpt, err := asynq.ParseRedisURI(r.URL)
	require.NoError(t, err)

	eo := cfg.engine
	eo.DB, eo.Redis, eo.Prefix = db.Gorm, r.Client, r.Prefix
	eo.Logger = testLogger(t)
	eng, err := engine.New(eo)
	require.NoError(t, err)

	jo := cfg.jobs
	jo.Redis, jo.Engine, jo.Queue, jo.Logger = redisOpt, eng, testenv.Unique("q"), testLogger(t)
	j, err := New(jo)
	require.NoError(t, err)
	eng.SetScheduler(j)
	t.Cleanup(func() {
		for _, q := range j.Queues() {
			r.DeleteQueueKeys(q)
			r.Client.SRem(context.Background(), "asynq:queues", q)
		}
	})
	t.Cleanup(j.Stop) // runs first: stop the worker before its queues go

	insp := asynq.NewInspector(redisOpt)
	t.Cleanup(func() { _ = insp.Close() })
	return &testBundle{db: db, redis: r, redisOpt: redisOpt, eng: eng, jobs: j, inspector: insp}
}

// venueWithHall creates a venue in Asia/Shanghai with one resource of the given capacity, open
// 00:00–24:00 every day in 1-minute slots, and returns the venue and resource ids.
func (b *testBundle) venueWithHall(t testing.TB, capacity int) (venueID, resourceID uint64) {
	t.Helper()
	ctx := context.Background()
	v, err := b.eng.CreateVenue(ctx, booking.System, engine.VenueInput{Name: "Release Hall", Timezone: "Asia/Shanghai"})
	require.NoError(t, err)
	res, err := b.eng.CreateResource(ctx, booking.System, engine.ResourceInput{
		VenueID: v.ID, Name: "hall", Kind: "room", Capacity: capacity,
	})
	require.NoError(t, err)
	_, err = b.eng.SetSchedule(ctx, booking.System, res.ID, booking.ScheduleInput{
		SlotMinutes: 1,
		Weekly:      []booking.WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: "00:00", Close: "24:00"}},
		HorizonDays: 2,
	})
	require.NoError(t, err)
	return v.ID, res.ID
}

// book holds and confirms the window of the current and the next minute's slot for user. The first
// slot has already started, so release_at = confirmed_at + grace: a few seconds ahead.
func (b *testBundle) book(ctx context.Context, resourceID uint64, user string) (booking.Booking, error) {
	var h booking.Hold
	var err error
	for range 2 { // a minute may end between reading the clock and the hold
		start := b.eng.Clock().Now().Truncate(time.Minute)
		h, err = b.eng.Hold(ctx, engine.HoldRequest{
			UserID: user, ResourceID: resourceID, Start: start, End: start.Add(2 * time.Minute), Quantity: 1,
		})
		if !errors.Is(err, booking.ErrSlotPast) {
			break
		}
	}
	if err != nil {
		return booking.Booking{}, fmt.Errorf("hold for %s: %w", user, err)
	}
	bk, err := b.eng.Confirm(ctx, booking.Actor{UserID: user, Role: booking.RoleUser}, h.ID)
	if err != nil {
		return booking.Booking{}, fmt.Errorf("confirm %s: %w", h.ID, err)
	}
	return bk, nil
}

// waitFor polls cond every 50 ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		require.NoError(t, err)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func refOf(bk booking.Booking) release.Ref {
	return release.Ref{BookingID: bk.ID, ReleaseAt: bk.ReleaseAt}
}

// lookupTask returns the state of a task, or 0 when it is not in the queue. It does not fail the
// test, so it may run on any goroutine.
func (b *testBundle) lookupTask(queue, id string) (asynq.TaskState, error) {
	info, err := b.inspector.GetTaskInfo(queue, id)
	if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return info.State, nil
}

// taskState is lookupTask for the test's goroutine.
func (b *testBundle) taskState(t testing.TB, queue, id string) asynq.TaskState {
	t.Helper()
	s, err := b.lookupTask(queue, id)
	require.NoError(t, err)
	return s
}

// taskLagBound is how late past release_at a release task of j (with no release loop running) may
// run: the rest of the second (tasks are scheduled on whole seconds), the forwarder's interval, the
// fetch's longest wait (one and a half FetchInterval) and half a second for the rest.
func (j *Jobs) taskLagBound() time.Duration {
	return time.Second + j.opts.ForwardInterval + j.opts.FetchInterval*3/2 + 500*time.Millisecond
}
