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
	"github.com/slotwheel/slotwheel/engine/release"
)

// fakeReleaser stands for Engine.ReleaseTask on the wall clock: a task still early after the
// task's own wait (here: any early one) gets a NotDueError; the first on time releases.
type fakeReleaser struct {
	calls      atomic.Int32
	releasedAt atomic.Pointer[time.Time]
	err        error
}

func (f *fakeReleaser) ReleaseTask(_ context.Context, ref release.Ref) (release.Outcome, error) {
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
	return &handlers{rel: rel, log: slog.New(slog.DiscardHandler)}
}

func releaseTask(ref release.Ref) *asynq.Task {
	return asynq.NewTask(TypeRelease, encodeRef(ref))
}

// A task on time releases; a duplicate delivery is a success that changes nothing. (How a task
// waits out an early start is the release service's, tested in engine/release.)
func TestReleaseHandlerReleases(t *testing.T) {
	t.Parallel()
	f := &fakeReleaser{}
	h := newTestHandlers(f)
	ref := release.Ref{BookingID: 1, ReleaseAt: time.Now().Truncate(time.Millisecond)}
	require.NoError(t, h.release(context.Background(), releaseTask(ref)))
	at := f.releasedAt.Load()
	require.NotNil(t, at)
	require.NoError(t, h.release(context.Background(), releaseTask(ref)))
	require.Equal(t, at, f.releasedAt.Load())
}

// A task too early for the release service's wait goes back to Asynq, retried close to its
// release_at without using up a retry.
func TestReleaseHandlerHandsBackFarEarlyStart(t *testing.T) {
	t.Parallel()
	f := &fakeReleaser{}
	h := newTestHandlers(f)
	ref := release.Ref{BookingID: 1, ReleaseAt: time.Now().Add(time.Minute)}

	err := h.release(context.Background(), releaseTask(ref))
	nd, ok := errors.AsType[*booking.NotDueError](err)
	require.True(t, ok, "got %v", err)
	require.Nil(t, f.releasedAt.Load())
	require.False(t, isFailure(err), "an early start must not use up a retry")
	d := retryDelay(3, err, releaseTask(ref))
	require.InDelta(t, (nd.Wait - time.Second).Seconds(), d.Seconds(), 0.001)
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
