package jobs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/slotwheel/slotwheel/engine"
)

// periodic enqueues the reconciliation once per period. asynq.Scheduler cannot do this across
// instances: its task options are fixed at Register, so it cannot give each period its own TaskID,
// and asynq.Unique lets the lock go as soon as the task succeeds, so a second instance firing a
// moment later would enqueue again. Instead every instance enqueues the period's task under the
// period's ID at each period start (retrying within the period if Redis fails); all but the first
// get ErrTaskIDConflict.
type periodic struct {
	every   time.Duration
	enqueue func(ctx context.Context, periodStart time.Time) error
	clock   engine.Clock
	log     *slog.Logger
	// retryAfter is how long to wait after a failed enqueue; default min(every, 10s).
	retryAfter time.Duration

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

func newPeriodic(every time.Duration, enqueue func(context.Context, time.Time) error, clock engine.Clock, log *slog.Logger) *periodic {
	return &periodic{
		every:      every,
		enqueue:    enqueue,
		clock:      clock,
		log:        log.With("loop", "reconcile_enqueuer"),
		retryAfter: min(every, 10*time.Second),
	}
}

// periodStart is the start of the period containing t, aligned on the Unix epoch so that every
// instance agrees on it.
func periodStart(t time.Time, every time.Duration) time.Time {
	ms, p := t.UnixMilli(), every.Milliseconds()
	if p <= 0 {
		return t
	}
	return time.UnixMilli(ms - ms%p).UTC()
}

// Start enqueues the reconciliation at every period start until Stop or until ctx ends. It does not
// enqueue one at once: reconciling at start-up is the binary's job (Engine.Reconcile before it
// serves), and every restart would otherwise run one more.
func (p *periodic) Start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel != nil {
		return
	}
	ctx, p.cancel = context.WithCancel(ctx)
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		wait := p.untilNext()
		for {
			if sleep(ctx, wait) != nil {
				return
			}
			// A timer firing a hair early enqueues the previous period again, a no-op, and the next
			// wait is then a millisecond.
			if _, err := p.runOnce(ctx); err != nil {
				if ctx.Err() == nil {
					p.log.Warn("enqueue reconciliation failed", "err", err)
				}
				wait = p.retryAfter
				continue
			}
			wait = p.untilNext()
		}
	}()
}

// untilNext is the time left until the next period starts.
func (p *periodic) untilNext() time.Duration {
	now := p.clock.Now()
	return max(periodStart(now, p.every).Add(p.every).Sub(now), time.Millisecond)
}

// Stop ends the loop and waits for it.
func (p *periodic) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel == nil {
		return
	}
	p.cancel()
	<-p.done
}

// runOnce enqueues the current period's reconciliation and returns when the next period starts.
func (p *periodic) runOnce(ctx context.Context) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := periodStart(p.clock.Now(), p.every)
	if err := p.enqueue(ctx, start); err != nil {
		return time.Time{}, err
	}
	return start.Add(p.every), nil
}
