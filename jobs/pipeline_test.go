package jobs

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/loop"
	"github.com/slotwheel/slotwheel/engine/release"
)

// recordingReleaser stands in for the engine: like Engine.ReleaseTask it waits for release_at, and
// it records when each booking was released.
type recordingReleaser struct {
	mu       sync.Mutex
	released map[uint64]time.Time
	calls    map[uint64]int
}

func (r *recordingReleaser) ReleaseTask(ctx context.Context, ref release.Ref) (release.Outcome, error) {
	if err := loop.Sleep(ctx, time.Until(ref.ReleaseAt)); err != nil {
		return "", err
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[ref.BookingID]++
	if _, ok := r.released[ref.BookingID]; ok {
		return release.AlreadyReleased, nil
	}
	r.released[ref.BookingID] = now
	return release.Released, nil
}

func (r *recordingReleaser) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.released)
}

// TestQueueReleasesOnTime checks the Asynq side alone — whole-second scheduling, the forwarder and
// fetch intervals — against a stand-in engine: the durable timer behind the release loop releases
// at release_at, never before, and at most the rest of the second plus the forwarder's and the
// fetch's intervals after (the fetch waits up to one and a half FetchInterval).
func TestQueueReleasesOnTime(t *testing.T) {
	t.Parallel()
	b := setup(t, testConfig{jobs: Options{Concurrency: 128}})
	rec := &recordingReleaser{released: map[uint64]time.Time{}, calls: map[uint64]int{}}
	b.jobs.handlers.rel = rec
	ctx := context.Background()
	require.NoError(t, b.jobs.Start(ctx))

	const n = 60
	refs := make([]release.Ref, n)
	base := time.Now().Add(2 * time.Second)
	for i := range refs {
		// Spread over ~1.5 s so every sub-second offset of release_at is exercised.
		refs[i] = release.Ref{BookingID: uint64(i + 1), ReleaseAt: base.Add(time.Duration(i) * 25 * time.Millisecond).Truncate(time.Millisecond)}
		_, err := b.jobs.ScheduleRelease(ctx, refs[i])
		require.NoError(t, err)
	}
	waitFor(t, 15*time.Second, "all releases", func() (bool, error) { return rec.count() == n, nil })

	var lags []time.Duration
	rec.mu.Lock()
	for _, ref := range refs {
		lag := rec.released[ref.BookingID].Sub(ref.ReleaseAt)
		require.GreaterOrEqual(t, lag, time.Duration(0), "booking %d released early", ref.BookingID)
		lags = append(lags, lag)
	}
	rec.mu.Unlock()
	slices.Sort(lags)
	t.Logf("queue-only release lag: p50 %s, max %s", lags[n/2], lags[n-1])
	require.Less(t, lags[n-1], b.jobs.taskLagBound())
}
