package release

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/clock"
)

// wallReleaser stands for Release on the wall clock shifted by skew (the clock of the instance that
// queued the task ran ahead): early calls get a NotDueError, the first call on time releases.
type wallReleaser struct {
	skew       time.Duration
	calls      atomic.Int32
	releasedAt atomic.Pointer[time.Time]
}

func (w *wallReleaser) Release(_ context.Context, ref Ref) (Outcome, error) {
	w.calls.Add(1)
	now, due := time.Now(), ref.ReleaseAt.Add(w.skew)
	if now.Before(due) {
		return "", &booking.NotDueError{Wait: due.Sub(now)}
	}
	if !w.releasedAt.CompareAndSwap(nil, &now) {
		return AlreadyReleased, nil
	}
	return Released, nil
}

func task(ctx context.Context, w *wallReleaser, ref Ref) (Outcome, error) {
	return waitThenRelease(ctx, clock.Real{}, 5*time.Second, ref, w)
}

// A task that starts early waits for release_at before it asks SQL anything, then releases once.
func TestTaskWaitsOutAnEarlyStart(t *testing.T) {
	t.Parallel()
	w := &wallReleaser{}
	ref := Ref{BookingID: 1, ReleaseAt: time.Now().Add(300 * time.Millisecond).Truncate(time.Millisecond)}

	out, err := task(context.Background(), w, ref)
	require.NoError(t, err)
	require.Equal(t, Released, out)
	at := w.releasedAt.Load()
	require.NotNil(t, at)
	require.False(t, at.Before(ref.ReleaseAt), "released %s before release_at", ref.ReleaseAt.Sub(*at))
	require.Equal(t, int32(1), w.calls.Load(), "an early start must not reach SQL before release_at")

	out, err = task(context.Background(), w, ref)
	require.NoError(t, err)
	require.Equal(t, AlreadyReleased, out, "a duplicate delivery changes nothing")
	require.Equal(t, at, w.releasedAt.Load())
}

// Should Release still find the task early, the task waits what Release says is left.
func TestTaskWaitsWhatReleaseSaysIsLeft(t *testing.T) {
	t.Parallel()
	w := &wallReleaser{skew: 200 * time.Millisecond}
	ref := Ref{BookingID: 1, ReleaseAt: time.Now().Add(100 * time.Millisecond).Truncate(time.Millisecond)}

	out, err := task(context.Background(), w, ref)
	require.NoError(t, err)
	require.Equal(t, Released, out)
	require.False(t, w.releasedAt.Load().Before(ref.ReleaseAt.Add(w.skew)), "released before Release's release_at")
	require.Equal(t, int32(2), w.calls.Load())
}

// A task far too early holds no worker: it answers how long is left at once, and asks nothing.
func TestTaskHandsBackAFarEarlyStart(t *testing.T) {
	t.Parallel()
	w := &wallReleaser{}
	ref := Ref{BookingID: 1, ReleaseAt: time.Now().Add(time.Minute)}

	start := time.Now()
	_, err := task(context.Background(), w, ref)
	require.Less(t, time.Since(start), time.Second, "must not hold a worker for a far-off release")
	nd, ok := errors.AsType[*booking.NotDueError](err)
	require.True(t, ok, "got %v", err)
	require.Greater(t, nd.Wait, 55*time.Second)
	require.Zero(t, w.calls.Load())
}

// A task waiting for release_at stops when its context ends (the worker shuts down).
func TestTaskStopsWaitingOnShutdown(t *testing.T) {
	t.Parallel()
	w := &wallReleaser{}
	ref := Ref{BookingID: 1, ReleaseAt: time.Now().Add(3 * time.Second)}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := task(ctx, w, ref)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), time.Second)
	require.Zero(t, w.calls.Load())
}
