package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine"
)

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := New(Options{})
	require.Error(t, err)
	_, err = New(Options{Redis: asynq.RedisClientOpt{Addr: "127.0.0.1:1"}})
	require.Error(t, err)
}

func TestPayloadRoundTrip(t *testing.T) {
	t.Parallel()
	ref := engine.ReleaseRef{BookingID: 7, ReleaseAt: time.UnixMilli(1_700_000_000_123).UTC()}
	require.JSONEq(t, `{"booking_id":7,"release_at_ms":1700000000123}`, string(encodeRef(ref)))
	got, err := decodeRef(encodeRef(ref))
	require.NoError(t, err)
	require.Equal(t, ref, got)
	require.Equal(t, "release:7:1700000000123", ReleaseTaskID(ref))
	require.Equal(t, "remind:7:1700000000123", ReminderTaskID(ref))

	_, err = decodeRef([]byte(`{"booking_id":0,"release_at_ms":1}`))
	require.Error(t, err)
	_, err = decodeRef([]byte(`nope`))
	require.Error(t, err)
}

func TestScheduleAndCancelRelease(t *testing.T) {
	t.Parallel()
	b := setup(t, testConfig{})
	ctx := context.Background()
	j := b.jobs
	now := time.Now().UTC()

	// Cancelling before anything was queued (the queues do not even exist yet) is fine.
	ref := engine.ReleaseRef{BookingID: 42, ReleaseAt: now.Add(time.Hour).Truncate(time.Millisecond)}
	require.NoError(t, j.CancelRelease(ctx, ref))

	require.NoError(t, j.ScheduleRelease(ctx, ref))
	info, err := b.inspector.GetTaskInfo(j.ReleaseQueue(), ReleaseTaskID(ref))
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStateScheduled, info.State)
	require.Equal(t, TypeRelease, info.Type)
	require.Equal(t, releaseMaxRetry, info.MaxRetry)
	got, err := decodeRef(info.Payload)
	require.NoError(t, err)
	require.Equal(t, ref, got)
	// Due one second early, in Asynq's whole seconds.
	require.Equal(t, ref.ReleaseAt.Add(-time.Second).Unix(), info.NextProcessAt.Unix())

	rem, err := b.inspector.GetTaskInfo(j.MaintQueue(), ReminderTaskID(ref))
	require.NoError(t, err)
	require.Equal(t, TypeRemind, rem.Type)
	require.Equal(t, ref.ReleaseAt.Add(-DefaultReminderLead).Unix(), rem.NextProcessAt.Unix())

	// Scheduling again is a no-op, not an error.
	require.NoError(t, j.ScheduleRelease(ctx, ref))
	scheduled, err := b.inspector.ListScheduledTasks(j.ReleaseQueue())
	require.NoError(t, err)
	require.Len(t, scheduled, 1)

	// A restored booking has a new release_at and so a task of its own.
	restored := engine.ReleaseRef{BookingID: 42, ReleaseAt: ref.ReleaseAt.Add(20 * time.Minute)}
	require.NoError(t, j.ScheduleRelease(ctx, restored))
	scheduled, err = b.inspector.ListScheduledTasks(j.ReleaseQueue())
	require.NoError(t, err)
	require.Len(t, scheduled, 2)

	// No reminder when its time has passed.
	soon := engine.ReleaseRef{BookingID: 43, ReleaseAt: now.Add(5 * time.Minute)}
	require.NoError(t, j.ScheduleRelease(ctx, soon))
	require.Zero(t, b.taskState(t, j.MaintQueue(), ReminderTaskID(soon)))
	require.Equal(t, asynq.TaskStateScheduled, b.taskState(t, j.ReleaseQueue(), ReleaseTaskID(soon)))

	// Cancel removes both tasks of that ref only, and is idempotent.
	require.NoError(t, j.CancelRelease(ctx, ref))
	require.Zero(t, b.taskState(t, j.ReleaseQueue(), ReleaseTaskID(ref)))
	require.Zero(t, b.taskState(t, j.MaintQueue(), ReminderTaskID(ref)))
	require.Equal(t, asynq.TaskStateScheduled, b.taskState(t, j.ReleaseQueue(), ReleaseTaskID(restored)))
	require.NoError(t, j.CancelRelease(ctx, ref))
}

func TestReconcileEnqueuedOncePerPeriod(t *testing.T) {
	t.Parallel()
	b := setup(t, testConfig{jobs: Options{ReconcileEvery: time.Hour}})
	ctx := context.Background()

	// A second instance on the same queues, as another replica would be.
	other, err := New(Options{Redis: b.redisOpt, Engine: b.eng, Queue: b.jobs.ReleaseQueue(), Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(other.Stop)

	next1, err := b.jobs.periodic.runOnce(ctx)
	require.NoError(t, err)
	next2, err := other.periodic.runOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, next1, next2)
	_, err = b.jobs.periodic.runOnce(ctx)
	require.NoError(t, err)

	pending, err := b.inspector.ListPendingTasks(b.jobs.MaintQueue())
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.Equal(t, TypeReconcile, pending[0].Type)
	require.Equal(t, ReconcileTaskID(next1.Add(-time.Hour)), pending[0].ID)
}

func TestPeriodStart(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 9, 10, 37, 12, 5e8, time.UTC)
	require.Equal(t, time.Date(2025, 3, 9, 10, 0, 0, 0, time.UTC), periodStart(at, time.Hour))
	require.Equal(t, time.Date(2025, 3, 9, 10, 30, 0, 0, time.UTC), periodStart(at, 15*time.Minute))
	require.Equal(t, "reconcile:1741514400", ReconcileTaskID(periodStart(at, time.Hour)))
}

func TestReconcileEnqueuerRunsAtPeriodStarts(t *testing.T) {
	t.Parallel()
	b := setup(t, testConfig{jobs: Options{ReconcileEvery: time.Second}})
	other, err := New(Options{Redis: b.redisOpt, Engine: b.eng, Queue: b.jobs.ReleaseQueue(), ReconcileEvery: time.Second, Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(other.Stop)

	// Two instances' enqueuers, no worker: the tasks stay pending where we can count them.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := time.Now()
	b.jobs.periodic.Start(ctx)
	other.periodic.Start(ctx)
	time.Sleep(2500 * time.Millisecond)
	b.jobs.periodic.Stop()
	other.periodic.Stop()
	stopped := time.Now()

	pending, err := b.inspector.ListPendingTasks(b.jobs.MaintQueue())
	require.NoError(t, err)
	var want []string
	for s := periodStart(started, time.Second).Add(time.Second); !s.After(stopped); s = s.Add(time.Second) {
		want = append(want, ReconcileTaskID(s))
	}
	var got []string
	for _, p := range pending {
		got = append(got, p.ID)
	}
	// A boundary within a few ms of starting or stopping may go either way.
	require.GreaterOrEqual(t, len(got), len(want)-1)
	require.LessOrEqual(t, len(got), len(want))
	require.Subset(t, want, got, "one task per period start, none at Start")
}
