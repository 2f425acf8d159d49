package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
)

// A booking whose release task was archived (its retries ran out during an outage) is released
// within seconds of the fault clearing, by the overdue sweep, and the dead letter is resolved.
func TestArchivedReleaseTaskIsResolved(t *testing.T) {
	t.Parallel()
	b := setup(t, testConfig{engine: engine.Options{DefaultGrace: 3 * time.Second}})
	ctx := context.Background()
	_, resourceID := b.venueWithHall(t, 2)
	bk, err := b.book(ctx, resourceID, "u-archived")
	require.NoError(t, err)
	ref := refOf(bk)
	require.NoError(t, b.inspector.ArchiveTask(b.jobs.ReleaseQueue(), ReleaseTaskID(ref)))
	require.Equal(t, asynq.TaskStateArchived, b.taskState(t, b.jobs.ReleaseQueue(), ReleaseTaskID(ref)))

	require.NoError(t, b.jobs.Start(ctx))
	loops := b.eng.NewLoops(engine.LoopsConfig{})
	loops.Start(ctx)
	t.Cleanup(loops.Stop)
	var got booking.Booking
	waitFor(t, 20*time.Second, "the booking to be released", func() (bool, error) {
		got, err = b.eng.GetBooking(ctx, booking.System, bk.ID)
		return got.Status == booking.Released, err
	})
	require.False(t, got.ReleasedAt.Before(got.ReleaseAt), "never early")
	require.Less(t, got.ReleasedAt.Sub(got.ReleaseAt), 10*time.Second, "released within 10 s although its task was dead")
	require.NoError(t, b.jobs.runLoop(ctx, "archived_releases"))
	require.Zero(t, b.taskState(t, b.jobs.ReleaseQueue(), ReleaseTaskID(ref)), "the dead letter is resolved")

	// A dead letter whose booking still waits is left for an operator to read and re-drive.
	bk2, err := b.book(ctx, resourceID, "u-archived-2")
	require.NoError(t, err)
	ref2 := refOf(bk2)
	require.NoError(t, b.inspector.ArchiveTask(b.jobs.ReleaseQueue(), ReleaseTaskID(ref2)))
	require.NoError(t, b.jobs.runLoop(ctx, "archived_releases"))
	require.Equal(t, asynq.TaskStateArchived, b.taskState(t, b.jobs.ReleaseQueue(), ReleaseTaskID(ref2)), "left for the operator")
	// Its booking is released on time all the same, and then the dead letter goes.
	waitFor(t, 20*time.Second, "the second booking to be released", func() (bool, error) {
		got, err = b.eng.GetBooking(ctx, booking.System, bk2.ID)
		return got.Status == booking.Released, err
	})
	require.False(t, got.ReleasedAt.Before(got.ReleaseAt), "never early")
	require.NoError(t, b.jobs.runLoop(ctx, "archived_releases"))
	require.Zero(t, b.taskState(t, b.jobs.ReleaseQueue(), ReleaseTaskID(ref2)))
}
