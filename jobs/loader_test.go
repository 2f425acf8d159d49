package jobs

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/engine/release"
)

// fakeDue is an in-memory DueReleases/MarkReleaseQueued: bookings by release_at, oldest first.
type fakeDue struct {
	mu     sync.Mutex
	refs   []release.Ref
	queued map[uint64]bool
}

func (f *fakeDue) DueReleases(_ context.Context, until time.Time, limit int) ([]release.Ref, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []release.Ref
	for _, r := range f.refs {
		if r.ReleaseAt.Before(until) && !f.queued[r.BookingID] && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeDue) MarkReleaseQueued(_ context.Context, refs []release.Ref) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range refs {
		f.queued[r.BookingID] = true
	}
	return nil
}

type fakeScheduler struct {
	mu        sync.Mutex
	scheduled []uint64
	failFor   uint64
}

func (s *fakeScheduler) ScheduleRelease(_ context.Context, ref release.Ref) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ref.BookingID == s.failFor {
		return false, errors.New("redis down")
	}
	s.scheduled = append(s.scheduled, ref.BookingID)
	return true, nil
}

func (s *fakeScheduler) CancelRelease(context.Context, release.Ref) error { return nil }

func TestLoaderRunOnce(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)
	clock := clock.NewSimulated(now)
	src := &fakeDue{queued: map[uint64]bool{}}
	for i := range 7 {
		src.refs = append(src.refs, release.Ref{BookingID: uint64(i + 1), ReleaseAt: now.Add(time.Duration(i) * 20 * time.Minute)})
	}
	sched := &fakeScheduler{failFor: 2}
	l := &loader{horizon: time.Hour, src: src, sched: sched, clock: clock, batch: 2, maxBatches: 20}

	// Within the hour: bookings 1–3 (0, 20, 40 min); 2 fails to queue and is not marked.
	n, err := l.runOnce(context.Background())
	require.Error(t, err)
	require.Equal(t, 1, n) // the failure stops the run after its batch
	sched.failFor = 0
	n, err = l.runOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.ElementsMatch(t, []uint64{1, 2, 3}, sched.scheduled)

	// Nothing new until time moves; then the next ones come within the horizon.
	n, err = l.runOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
	clock.Advance(time.Hour)
	n, err = l.runOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, n) // 60, 80, 100 min: two batches in one run
	require.ElementsMatch(t, []uint64{1, 2, 3, 4, 5, 6}, sched.scheduled)
}

func TestLoaderBringsInBeyondHorizon(t *testing.T) {
	t.Parallel()
	const horizon = 2 * time.Second
	b := setup(t, testConfig{
		engine: engine.Options{DefaultGrace: 5 * time.Second, ReleaseHorizon: horizon},
		jobs:   Options{LoaderInterval: 100 * time.Millisecond},
	})
	ctx := context.Background()
	_, resourceID := b.venueWithHall(t, 10)
	require.NoError(t, b.jobs.Start(ctx))

	bk, err := b.book(ctx, resourceID, "u-far")
	require.NoError(t, err)
	ref := refOf(bk)
	require.Greater(t, time.Until(ref.ReleaseAt), horizon+time.Second, "test setup: release_at must lie beyond the horizon")

	// Beyond the horizon the booking costs the queue nothing.
	require.Zero(t, b.taskState(t, b.jobs.ReleaseQueue(), ReleaseTaskID(ref)))

	// The loader brings it in once release_at is within the horizon, and not before.
	var appeared time.Time
	waitFor(t, 10*time.Second, "the release task to be queued", func() (bool, error) {
		if b.taskState(t, b.jobs.ReleaseQueue(), ReleaseTaskID(ref)) == 0 {
			return false, nil
		}
		appeared = time.Now()
		return true, nil
	})
	require.False(t, appeared.Before(ref.ReleaseAt.Add(-horizon)), "queued %s before the horizon", ref.ReleaseAt.Add(-horizon).Sub(appeared))
	require.True(t, appeared.Before(ref.ReleaseAt), "queued only %s after release_at", appeared.Sub(ref.ReleaseAt))

	// And it is released on time.
	var got booking.Booking
	waitFor(t, 15*time.Second, "the booking to be released", func() (bool, error) {
		got, err = b.eng.GetBooking(ctx, booking.System, bk.ID)
		return got.Status == booking.Released, err
	})
	require.NotNil(t, got.ReleasedAt)
	require.False(t, got.ReleasedAt.Before(got.ReleaseAt), "released %s early", got.ReleaseAt.Sub(*got.ReleasedAt))
	require.Less(t, got.ReleasedAt.Sub(got.ReleaseAt), b.jobs.taskLagBound())
}
