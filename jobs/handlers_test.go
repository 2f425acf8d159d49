package jobs

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/engine/release"
)

// fakeReleaser behaves like Engine.Release on the wall clock: early calls get a NotDueError.
type fakeReleaser struct {
	calls      atomic.Int32
	releasedAt atomic.Pointer[time.Time]
	err        error
}

func (f *fakeReleaser) Release(_ context.Context, ref release.Ref) (release.Outcome, error) {
	f.calls.Add(1)
	if f.err != nil {
		return "", f.err
	}
	now := time.Now()
	if now.Before(ref.ReleaseAt) {
		return "", &booking.NotDueError{Wait: ref.ReleaseAt.Sub(now)}
	}
	if !f.releasedAt.CompareAndSwap(nil, &now) {
		return release.AlreadyReleased, nil
	}
	return release.Released, nil
}

func newTestHandlers(rel releaser) *handlers {
	return &handlers{rel: rel, clock: clock.Real{}, log: slog.New(slog.DiscardHandler)}
}

func releaseTask(ref release.Ref) *asynq.Task {
	return asynq.NewTask(TypeRelease, encodeRef(ref))
}

func TestReleaseHandlerWaitsOutEarlyStart(t *testing.T) {
	t.Parallel()
	f := &fakeReleaser{}
	h := newTestHandlers(f)
	ref := release.Ref{BookingID: 1, ReleaseAt: time.Now().Add(300 * time.Millisecond).Truncate(time.Millisecond)}

	require.NoError(t, h.release(context.Background(), releaseTask(ref)))
	at := f.releasedAt.Load()
	require.NotNil(t, at)
	require.False(t, at.Before(ref.ReleaseAt), "released %s before release_at", ref.ReleaseAt.Sub(*at))
	require.Less(t, at.Sub(ref.ReleaseAt), 100*time.Millisecond)
	require.Equal(t, int32(1), f.calls.Load(), "an early start must not reach the engine before release_at")

	// A duplicate delivery is a success that changes nothing.
	require.NoError(t, h.release(context.Background(), releaseTask(ref)))
	require.Equal(t, at, f.releasedAt.Load())
}

// skewedReleaser is an engine whose clock runs behind the worker's: it still finds the release
// early when the worker thinks it is due.
type skewedReleaser struct {
	fakeReleaser
	skew time.Duration
}

func (s *skewedReleaser) Release(ctx context.Context, ref release.Ref) (release.Outcome, error) {
	return s.fakeReleaser.Release(ctx, release.Ref{BookingID: ref.BookingID, ReleaseAt: ref.ReleaseAt.Add(s.skew)})
}

func TestReleaseHandlerWaitsForTheEngine(t *testing.T) {
	t.Parallel()
	f := &skewedReleaser{skew: 200 * time.Millisecond}
	h := newTestHandlers(f)
	ref := release.Ref{BookingID: 1, ReleaseAt: time.Now().Add(100 * time.Millisecond).Truncate(time.Millisecond)}

	require.NoError(t, h.release(context.Background(), releaseTask(ref)))
	at := f.releasedAt.Load()
	require.NotNil(t, at)
	require.False(t, at.Before(ref.ReleaseAt.Add(f.skew)), "released before the engine's release_at")
	require.Equal(t, int32(2), f.calls.Load())
}

func TestReleaseHandlerHandsBackFarEarlyStart(t *testing.T) {
	t.Parallel()
	f := &fakeReleaser{}
	h := newTestHandlers(f)
	ref := release.Ref{BookingID: 1, ReleaseAt: time.Now().Add(time.Minute)}

	start := time.Now()
	err := h.release(context.Background(), releaseTask(ref))
	require.Less(t, time.Since(start), time.Second, "must not hold a worker for a far-off release")
	nd, ok := errors.AsType[*booking.NotDueError](err)
	require.True(t, ok, "got %v", err)
	require.Nil(t, f.releasedAt.Load())
	require.False(t, isFailure(err), "an early start must not use up a retry")
	d := retryDelay(3, err, releaseTask(ref))
	require.InDelta(t, (nd.Wait - time.Second).Seconds(), d.Seconds(), 0.001)
}

func TestReleaseHandlerStopsWaitingOnShutdown(t *testing.T) {
	t.Parallel()
	h := newTestHandlers(&fakeReleaser{})
	ref := release.Ref{BookingID: 1, ReleaseAt: time.Now().Add(3 * time.Second)}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := h.release(ctx, releaseTask(ref))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), time.Second)
}

func TestReleaseHandlerErrors(t *testing.T) {
	t.Parallel()
	f := &fakeReleaser{err: booking.ErrBackendUnavailable}
	h := newTestHandlers(f)
	ref := release.Ref{BookingID: 9, ReleaseAt: time.Now()}
	err := h.release(context.Background(), releaseTask(ref))
	require.ErrorIs(t, err, booking.ErrBackendUnavailable)
	require.True(t, isFailure(err))

	err = h.release(context.Background(), asynq.NewTask(TypeRelease, []byte(`{"booking_id":"x"}`)))
	require.ErrorIs(t, err, asynq.SkipRetry)
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for n, want := range map[int]time.Duration{
		0: time.Second, 1: 2 * time.Second, 3: 8 * time.Second, 5: 32 * time.Second,
		6: time.Minute, 7: time.Minute, 100: time.Minute,
	} {
		require.Equal(t, want, retryDelay(n, boom, asynq.NewTask(TypeRelease, nil)), "n=%d", n)
	}
}
