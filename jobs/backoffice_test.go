package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/release"
)

var ops = booking.Actor{UserID: "ops", Role: booking.RoleAdmin}

// An operator sees a dead-lettered release with its booking, and re-drives it: the booking is
// released through the engine — never early — and the dead letter is gone. Only admins may.
func TestRedriveADeadLetteredRelease(t *testing.T) {
	t.Parallel()
	b := setup(t, testConfig{engine: engine.Options{DefaultGrace: time.Second}})
	ctx := context.Background()
	_, resourceID := b.venueWithHall(t, 2)
	bk, err := b.book(ctx, resourceID, "u-dead")
	require.NoError(t, err)
	ref := refOf(bk)
	queue, id := b.jobs.ReleaseQueue(), ReleaseTaskID(ref)
	require.NoError(t, b.inspector.ArchiveTask(queue, id))

	tasks, err := b.eng.Tasks(ctx, ops, "archived", 0)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	require.Equal(t, engine.Task{Queue: queue, ID: id, Type: TypeRelease, State: "archived", BookingID: bk.ID,
		ReleaseAt: ref.ReleaseAt.UTC(), MaxRetry: releaseMaxRetry}, withoutTimes(tasks[0]))
	retrying, err := b.eng.Tasks(ctx, ops, "retry", 0)
	require.NoError(t, err)
	require.Empty(t, retrying)
	counts, err := b.eng.Operations(ctx, ops, 0)
	require.NoError(t, err)
	require.Contains(t, counts.Queues, engine.QueueCount{Queue: queue, Archived: 1})

	_, err = b.eng.Tasks(ctx, booking.Actor{UserID: "sam", Role: booking.RoleStaff, VenueID: bk.VenueID}, "archived", 0)
	require.ErrorIs(t, err, booking.ErrForbidden)
	_, err = b.eng.Tasks(ctx, ops, "pending", 0)
	require.ErrorIs(t, err, booking.Invalid("invalid_status", ""))
	_, err = b.eng.RedriveTask(ctx, ops, queue, "no-such-task")
	require.ErrorIs(t, err, booking.ErrNotFound)
	_, err = b.eng.RedriveTask(ctx, ops, "someone-elses-queue", id)
	require.ErrorIs(t, err, booking.ErrNotFound)

	r, err := b.eng.RedriveTask(ctx, ops, queue, id)
	require.NoError(t, err)
	require.True(t, r.Done, "%+v", r)
	require.Equal(t, string(release.Released), r.Outcome)
	got, err := b.eng.GetBooking(ctx, booking.System, bk.ID)
	require.NoError(t, err)
	require.Equal(t, booking.Released, got.Status)
	require.False(t, got.ReleasedAt.Before(got.ReleaseAt), "never early: the re-drive waited for release_at")
	require.Zero(t, b.taskState(t, queue, id), "the dead letter is gone")
	tasks, err = b.eng.Tasks(ctx, ops, "archived", 0)
	require.NoError(t, err)
	require.Empty(t, tasks)

	// A re-drive whose work fails keeps its task and says why.
	bk2, err := b.book(ctx, resourceID, "u-dead-2")
	require.NoError(t, err)
	id2 := ReleaseTaskID(refOf(bk2))
	require.NoError(t, b.inspector.ArchiveTask(queue, id2))
	require.NoError(t, b.redis.Client.Close()) // the engine's Redis is gone
	r, err = b.eng.RedriveTask(ctx, ops, queue, id2)
	require.NoError(t, err)
	require.False(t, r.Done)
	require.NotEmpty(t, r.Error)
	require.Equal(t, asynq.TaskStateArchived, b.taskState(t, queue, id2))
}

func withoutTimes(t engine.Task) engine.Task {
	t.LastFailedAt, t.NextProcessAt, t.LastError = time.Time{}, time.Time{}, ""
	t.ReleaseAt = t.ReleaseAt.UTC()
	return t
}
