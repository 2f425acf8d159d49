package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/engine/release"
)

// dueSource is what the loader needs of *engine.Engine.
type dueSource interface {
	DueReleases(ctx context.Context, until time.Time, limit int) ([]release.Ref, error)
	MarkReleaseQueued(ctx context.Context, refs []release.Ref) error
}

// loader brings bookings whose release_at comes within the horizon from SQL into the queue, so that
// bookings weeks ahead cost Redis nothing. It runs as the "release_loader" loop.
type loader struct {
	horizon    time.Duration
	src        dueSource
	sched      release.Scheduler
	clock      clock.Clock
	batch      int // bookings one engine call returns
	maxBatches int // bounds one run, so that a burst is drained quickly but a run always ends
}

// runOnce queues the release of every booking due within the horizon that is not queued yet, and
// reports how many it queued. A booking that fails to queue is not marked, so the next run retries it.
func (l *loader) runOnce(ctx context.Context) (int, error) {
	total := 0
	for range l.maxBatches {
		refs, err := l.src.DueReleases(ctx, l.clock.Now().Add(l.horizon), l.batch)
		if err != nil {
			return total, fmt.Errorf("due releases: %w", err)
		}
		queued, errs := make([]release.Ref, 0, len(refs)), []error(nil)
		for _, ref := range refs {
			if _, err := l.sched.ScheduleRelease(ctx, ref); err != nil {
				errs = append(errs, err)
				continue
			}
			queued = append(queued, ref)
		}
		if len(queued) > 0 {
			if err := l.src.MarkReleaseQueued(ctx, queued); err != nil {
				errs = append(errs, fmt.Errorf("mark release queued: %w", err))
			}
		}
		total += len(queued)
		loaderBatch.Set(float64(len(refs)))
		if err := errors.Join(errs...); err != nil {
			return total, err
		}
		if len(refs) < l.batch {
			break
		}
	}
	return total, nil
}
