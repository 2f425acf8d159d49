package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/testenv"
)

// TestRedisLossRebuildsScheduledReleases: Redis loses everything (the venue's keys and the queue's)
// and the process restarts. Start-up reconciliation re-creates the release task from MySQL, the
// booking's unit is counted again (no oversell), and the no-show is still released on time.
func TestRedisLossRebuildsScheduledReleases(t *testing.T) {
	t.Parallel()
	b := setup(t, testConfig{engine: engine.Options{DefaultGrace: 4 * time.Second}})
	ctx := context.Background()
	venueID, resourceID := b.venueWithHall(t, 1)
	bk, err := b.book(ctx, resourceID, "u-lost")
	require.NoError(t, err)
	ref := refOf(bk)
	require.NotZero(t, b.taskState(t, b.jobs.ReleaseQueue(), ReleaseTaskID(ref)), "queued at confirm")

	// Redis forgets everything this test wrote; the "process" is restarted without starting the
	// worker yet, as main does: reconcile first.
	// (Only this test's keys: the Redis may be shared. Asynq's list of queue names stays, as the
	// dashboard's inspector needs it to find the queue; the worker itself does not.)
	for _, pattern := range []string{"asynq:{" + b.jobs.ReleaseQueue() + "}:*", "asynq:{" + b.jobs.MaintQueue() + "}:*",
		testenv.VenuePattern(b.redis.Prefix, venueID)} {
		keys, err := b.redis.Client.Keys(ctx, pattern).Result()
		require.NoError(t, err)
		if len(keys) > 0 {
			require.NoError(t, b.redis.Client.Del(ctx, keys...).Err())
		}
	}
	require.Zero(t, b.taskState(t, b.jobs.ReleaseQueue(), ReleaseTaskID(ref)), "the task is gone with Redis")

	rep, err := b.eng.Reconcile(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.OwnersAdded, "the booking's unit is counted again")
	require.Equal(t, 1, rep.TasksScheduled, "the lost task is re-created")
	require.NotZero(t, b.taskState(t, b.jobs.ReleaseQueue(), ReleaseTaskID(ref)), "re-created from MySQL")
	again, err := b.eng.Reconcile(ctx)
	require.NoError(t, err)
	require.Zero(t, again.TasksScheduled, "the task is there now: nothing to repair")
	_, err = b.eng.Hold(ctx, engine.HoldRequest{UserID: "other", ResourceID: resourceID, Start: bk.Start, End: bk.End})
	require.ErrorIs(t, err, booking.ErrSlotFull, "no oversell after the rebuild")

	require.NoError(t, b.jobs.Start(ctx))
	var got booking.Booking
	waitFor(t, 15*time.Second, "the booking to be released", func() (bool, error) {
		got, err = b.eng.GetBooking(ctx, booking.System, bk.ID)
		return got.Status == booking.Released, err
	})
	require.False(t, got.ReleasedAt.Before(got.ReleaseAt), "released %s early", got.ReleaseAt.Sub(*got.ReleasedAt))
	require.Less(t, got.ReleasedAt.Sub(got.ReleaseAt), b.jobs.taskLagBound())
}

// TestRedisLossWhileRunning: Redis is emptied under a running worker and wheel. The wheel notices
// within a second, rebuilds from MySQL and the release still happens on time.
func TestRedisLossWhileRunning(t *testing.T) {
	t.Parallel()
	b := setup(t, testConfig{engine: engine.Options{DefaultGrace: 5 * time.Second}})
	ctx := context.Background()
	venueID, resourceID := b.venueWithHall(t, 1)
	_, err := b.eng.Reconcile(ctx) // as main does at start
	require.NoError(t, err)
	require.NoError(t, b.jobs.Start(ctx))
	wheel := b.eng.NewLoops(engine.LoopsConfig{})
	wheel.Start(ctx)
	t.Cleanup(wheel.Stop)
	bk, err := b.book(ctx, resourceID, "u-flushed")
	require.NoError(t, err)

	for _, pattern := range []string{"asynq:{" + b.jobs.ReleaseQueue() + "}:*", testenv.VenuePattern(b.redis.Prefix, venueID), testenv.AliveKey(b.redis.Prefix, b.jobs.ReleaseQueue())} {
		keys, err := b.redis.Client.Keys(ctx, pattern).Result()
		require.NoError(t, err)
		if len(keys) > 0 {
			require.NoError(t, b.redis.Client.Del(ctx, keys...).Err())
		}
	}
	var got booking.Booking
	waitFor(t, 20*time.Second, "the booking to be released", func() (bool, error) {
		got, err = b.eng.GetBooking(ctx, booking.System, bk.ID)
		return got.Status == booking.Released, err
	})
	require.False(t, got.ReleasedAt.Before(got.ReleaseAt), "released %s early", got.ReleaseAt.Sub(*got.ReleasedAt))
	require.Less(t, got.ReleasedAt.Sub(got.ReleaseAt), b.jobs.taskLagBound(), "by the loop, or by the rebuilt task")
}

// TestReconcileTwiceOnASteadyStateRepairsNothing: bookings whose release tasks are queued at confirm
// are the steady state; reconciliations in a row find their tasks already in the queue and count
// no repair (a count that stayed above zero would hide real repairs, and alert on none).
func TestReconcileTwiceOnASteadyStateRepairsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, testConfig{engine: engine.Options{DefaultGrace: 30 * time.Minute}})
	ctx := context.Background()
	_, resourceID := b.venueWithHall(t, 3)
	for _, user := range []string{"u-a", "u-b", "u-c"} {
		bk, err := b.book(ctx, resourceID, user)
		require.NoError(t, err)
		require.NotZero(t, b.taskState(t, b.jobs.ReleaseQueue(), ReleaseTaskID(refOf(bk))), "queued at confirm")
	}
	first, err := b.eng.Reconcile(ctx)
	require.NoError(t, err)
	require.Zero(t, first.TasksScheduled, "every task was queued at confirm")
	second, err := b.eng.Reconcile(ctx)
	require.NoError(t, err)
	require.Equal(t, engine.ReconcileReport{InventoryDays: second.InventoryDays}, second, "a second reconciliation repairs nothing")
}
