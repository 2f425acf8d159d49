package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/slotwheel/slotwheel/engine"
)

// dueSource is what the loader needs of *engine.Engine.
type dueSource interface {
	DueReleases(ctx context.Context, until time.Time, limit int) ([]engine.ReleaseRef, error)
	MarkReleaseQueued(ctx context.Context, refs []engine.ReleaseRef) error
}

// loaderConfig configures the loader. Zero values take the documented defaults.
type loaderConfig struct {
	// Interval between runs; default 1s.
	Interval time.Duration
	// Horizon is how far ahead of release_at a booking is queued; default 1h.
	Horizon time.Duration
	// BatchSize is how many bookings one engine call returns; default 500.
	BatchSize int
	// MaxBatches bounds the batches of one run, so a burst is drained quickly but a run always ends;
	// default 20.
	MaxBatches int
	// Timeout bounds one run; default 30s.
	Timeout time.Duration
}

func (c *loaderConfig) withDefaults() {
	setDefault(&c.Interval, DefaultLoaderInterval)
	setDefault(&c.Horizon, DefaultHorizon)
	setDefault(&c.Timeout, 30*time.Second)
	if c.BatchSize <= 0 {
		c.BatchSize = 500
	}
	if c.MaxBatches <= 0 {
		c.MaxBatches = 20
	}
}

// loader brings bookings whose release_at comes within the horizon from SQL into the queue, so that
// bookings weeks ahead cost Redis nothing.
type loader struct {
	cfg   loaderConfig
	src   dueSource
	sched engine.ReleaseScheduler
	clock engine.Clock
	log   *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

func newLoader(cfg loaderConfig, src dueSource, sched engine.ReleaseScheduler, clock engine.Clock, log *slog.Logger) *loader {
	cfg.withDefaults()
	return &loader{cfg: cfg, src: src, sched: sched, clock: clock, log: log.With("loop", "release_loader")}
}

// Start runs the loader every Interval until Stop or until ctx ends.
func (l *loader) Start(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return
	}
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		t := time.NewTicker(l.cfg.Interval)
		defer t.Stop()
		for {
			if _, err := l.runOnce(ctx); err != nil && ctx.Err() == nil {
				l.log.Warn("release loader run failed", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends the loop and waits for a run in progress.
func (l *loader) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
}

// runOnce queues the release of every booking due within the horizon that is not queued yet, and
// reports how many it queued. A booking that fails to queue is not marked, so the next run retries it.
func (l *loader) runOnce(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	total := 0
	for range l.cfg.MaxBatches {
		refs, err := l.src.DueReleases(ctx, l.clock.Now().Add(l.cfg.Horizon), l.cfg.BatchSize)
		if err != nil {
			loaderRuns.WithLabelValues("error").Inc()
			return total, fmt.Errorf("due releases: %w", err)
		}
		queued, errs := make([]engine.ReleaseRef, 0, len(refs)), []error(nil)
		for _, ref := range refs {
			if err := l.sched.ScheduleRelease(ctx, ref); err != nil {
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
			loaderRuns.WithLabelValues("error").Inc()
			return total, err
		}
		if len(refs) < l.cfg.BatchSize {
			break
		}
	}
	loaderRuns.WithLabelValues("ok").Inc()
	return total, nil
}
