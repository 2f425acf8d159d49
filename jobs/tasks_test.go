package jobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/engine/release"
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
	ref := release.Ref{BookingID: 7, ReleaseAt: time.UnixMilli(1_700_000_000_123).UTC()}
	require.Equal(t, "7:1700000000123", string(encodeRef(ref)))
	got, err := decodeRef(encodeRef(ref))
	require.NoError(t, err)
	require.Equal(t, ref, got)
	require.Equal(t, "release:7:1700000000123", ReleaseTaskID(ref))
	// Tasks queued before the payload was shortened still run.
	got, err = decodeRef([]byte(`{"booking_id":7,"release_at_ms":1700000000123}`))
	require.NoError(t, err)
	require.Equal(t, ref, got)

	for _, bad := range []string{`{"booking_id":0,"release_at_ms":1}`, `nope`, `7`, `7:`, `:1700000000123`, `0:1700000000123`,
		`7:0`, `7:-5`, `-7:1700000000123`, `7:17x`, `{"booking_id":"7"}`, ``} {
		_, err = decodeRef([]byte(bad))
		require.Error(t, err, "payload %q", bad)
	}
}

func TestScheduleAndCancelRelease(t *testing.T) {
	t.Parallel()
	b := setup(t, testConfig{})
	ctx := context.Background()
	j := b.jobs
	now := time.Now().UTC()

	// Cancelling before anything was queued (the queues do not even exist yet) is fine.
	ref := release.Ref{BookingID: 42, ReleaseAt: now.Add(time.Hour).Truncate(time.Millisecond)}
	require.NoError(t, j.CancelRelease(ctx, ref))

	added, err := j.ScheduleRelease(ctx, ref)
	require.NoError(t, err)
	require.True(t, added)
	info, err := b.inspector.GetTaskInfo(j.ReleaseQueue(), ReleaseTaskID(ref))
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStateScheduled, info.State)
	require.Equal(t, TypeRelease, info.Type)
	require.Equal(t, releaseMaxRetry, info.MaxRetry)
	got, err := decodeRef(info.Payload)
	require.NoError(t, err)
	require.Equal(t, ref, got)
	// Due at the first whole second at or after release_at, in Asynq's whole seconds: never before.
	require.Equal(t, ref.ReleaseAt.Add(time.Second-time.Millisecond).Unix(), info.NextProcessAt.Unix())

	// Scheduling again is a no-op, not an error, and says it added nothing.
	added, err = j.ScheduleRelease(ctx, ref)
	require.NoError(t, err)
	require.False(t, added, "the queue had it")
	scheduled, err := b.inspector.ListScheduledTasks(j.ReleaseQueue())
	require.NoError(t, err)
	require.Len(t, scheduled, 1)

	// A restored booking has a new release_at and so a task of its own.
	restored := release.Ref{BookingID: 42, ReleaseAt: ref.ReleaseAt.Add(20 * time.Minute)}
	added, err = j.ScheduleRelease(ctx, restored)
	require.NoError(t, err)
	require.True(t, added)
	scheduled, err = b.inspector.ListScheduledTasks(j.ReleaseQueue())
	require.NoError(t, err)
	require.Len(t, scheduled, 2)

	// Cancel removes the task of that ref only, and is idempotent.
	require.NoError(t, j.CancelRelease(ctx, ref))
	require.Zero(t, b.taskState(t, j.ReleaseQueue(), ReleaseTaskID(ref)))
	require.Equal(t, asynq.TaskStateScheduled, b.taskState(t, j.ReleaseQueue(), ReleaseTaskID(restored)))
	require.NoError(t, j.CancelRelease(ctx, ref))
}

func TestReconcileEnqueuedOncePerPeriod(t *testing.T) {
	t.Parallel()
	b := setup(t, testConfig{jobs: Options{ReconcileEvery: time.Hour}})
	ctx := context.Background()
	clock := clock.NewSimulated(time.Date(2026, 12, 7, 10, 37, 0, 0, time.UTC))
	// Two instances' enqueuers on the same queue, as two replicas would have; no worker runs, so
	// the tasks stay pending where they can be counted.
	mine := &reconcileEnqueuer{every: time.Hour, enqueue: b.jobs.enqueueReconcile, clock: clock}
	other, err := New(Options{Redis: b.redisOpt, Engine: b.eng, Queue: b.jobs.ReleaseQueue(), Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(other.Stop)
	theirs := &reconcileEnqueuer{every: time.Hour, enqueue: other.enqueueReconcile, clock: clock}
	pending := func() []string {
		tasks, err := b.inspector.ListPendingTasks(b.jobs.MaintQueue())
		if errors.Is(err, asynq.ErrQueueNotFound) {
			return nil
		}
		require.NoError(t, err)
		var ids []string
		for _, p := range tasks {
			require.Equal(t, TypeReconcile, p.Type)
			ids = append(ids, p.ID)
		}
		return ids
	}

	// Nothing in the period the instances started in: start-up reconciled already.
	for range 3 {
		require.NoError(t, mine.runOnce(ctx))
		require.NoError(t, theirs.runOnce(ctx))
	}
	require.Empty(t, pending())

	// Every later period gets one task, however often either instance runs.
	for _, at := range []time.Time{
		time.Date(2026, 12, 7, 11, 0, 0, 0, time.UTC), time.Date(2026, 12, 7, 11, 0, 1, 0, time.UTC),
		time.Date(2026, 12, 7, 11, 59, 59, 0, time.UTC), time.Date(2026, 12, 7, 12, 0, 0, 5e8, time.UTC),
	} {
		clock.Set(at)
		require.NoError(t, mine.runOnce(ctx))
		require.NoError(t, theirs.runOnce(ctx))
	}
	require.ElementsMatch(t, []string{
		ReconcileTaskID(time.Date(2026, 12, 7, 11, 0, 0, 0, time.UTC)),
		ReconcileTaskID(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)),
	}, pending())
}

// An enqueuer asks Redis once a period, not at every run: after its period's task is queued (or
// found there), later runs in the period cost nothing; a failed enqueue is tried again.
func TestReconcileEnqueuerAsksOncePerPeriod(t *testing.T) {
	t.Parallel()
	clock := clock.NewSimulated(time.Date(2026, 12, 7, 10, 37, 0, 0, time.UTC))
	var asked []time.Time
	fail := true
	r := &reconcileEnqueuer{every: time.Hour, clock: clock, enqueue: func(_ context.Context, start time.Time) error {
		asked = append(asked, start)
		if fail {
			fail = false
			return errors.New("redis away")
		}
		return nil
	}}
	ctx := context.Background()
	require.NoError(t, r.runOnce(ctx)) // the start-up period: nothing
	clock.Set(time.Date(2026, 12, 7, 11, 0, 0, 0, time.UTC))
	require.Error(t, r.runOnce(ctx))
	for range 5 {
		clock.Advance(time.Second)
		require.NoError(t, r.runOnce(ctx))
	}
	clock.Set(time.Date(2026, 12, 7, 12, 0, 1, 0, time.UTC))
	require.NoError(t, r.runOnce(ctx))
	require.NoError(t, r.runOnce(ctx))
	h11, h12 := time.Date(2026, 12, 7, 11, 0, 0, 0, time.UTC), time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	require.Equal(t, []time.Time{h11, h11, h12}, asked)
}

// The enqueuer sleeps until the next period begins, a second after a failure, and never less than
// a second nor more than a minute.
func TestReconcileEnqueuerWait(t *testing.T) {
	t.Parallel()
	clock := clock.NewSimulated(time.Date(2026, 12, 7, 10, 59, 30, 0, time.UTC))
	r := &reconcileEnqueuer{every: time.Hour, clock: clock}
	require.Equal(t, 30*time.Second, r.wait(nil))
	require.Equal(t, reconcileRetry, r.wait(errors.New("redis away")))
	clock.Set(time.Date(2026, 12, 7, 10, 59, 59, 800e6, time.UTC))
	require.Equal(t, reconcileRetry, r.wait(nil), "a wake a hair early looks again a second later")
	clock.Set(time.Date(2026, 12, 7, 11, 0, 0, 1e6, time.UTC))
	require.Equal(t, reconcileMaxSleep, r.wait(nil))
}

func TestPeriodStart(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 9, 10, 37, 12, 5e8, time.UTC)
	require.Equal(t, time.Date(2025, 3, 9, 10, 0, 0, 0, time.UTC), periodStart(at, time.Hour))
	require.Equal(t, time.Date(2025, 3, 9, 10, 30, 0, 0, time.UTC), periodStart(at, 15*time.Minute))
	require.Equal(t, "reconcile:1741514400", ReconcileTaskID(periodStart(at, time.Hour)))
}

// FuzzDecodeRef: a payload from Redis (anyone's) never panics the handler, and whatever decodes is
// a ref that encodes and decodes back to itself.
func FuzzDecodeRef(f *testing.F) {
	for _, s := range []string{"7:1700000000123", `{"booking_id":7,"release_at_ms":1700000000123}`, "nope", "7:", ":1", "18446744073709551615:9223372036854775807"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ref, err := decodeRef(b)
		if err != nil {
			return
		}
		require.NotZero(t, ref.BookingID)
		require.Positive(t, ref.ReleaseAt.UnixMilli())
		back, err := decodeRef(encodeRef(ref))
		require.NoError(t, err)
		require.Equal(t, ref, back)
	})
}
