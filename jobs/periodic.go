package jobs

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotwheel/slotwheel/engine/clock"
)

// reconcileEnqueuer enqueues the reconciliation once per period. asynq.Scheduler cannot do this
// across instances: its task options are fixed at Register, so it cannot give each period its own
// TaskID, and asynq.Unique lets the lock go as soon as the task succeeds, so a second instance firing
// a moment later would enqueue again. Instead every instance, as each period begins, enqueues the
// current period's task under the period's ID (the "reconcile_enqueuer" loop); all but the first get
// ErrTaskIDConflict, and a failed enqueue is simply tried again a second later. A period whose task
// this instance enqueued (or found there) is not asked about again, and the loop sleeps until the
// next period begins (wait): an idle instance's loop costs Redis one round trip a period, not one a
// second, and wakes about once a minute.
type reconcileEnqueuer struct {
	every   time.Duration
	enqueue func(ctx context.Context, periodStart time.Time) error
	clock   clock.Clock

	once  sync.Once
	first time.Time    // the period the process started in
	done  atomic.Int64 // the last period whose task is known to be queued, in unix milliseconds
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

// Bounds of the enqueuer's sleep (see wait): it looks again a second after a failed enqueue or
// after a wake that found its period not begun yet, and at least every minute, whatever a clock
// change did to the wake it asked for.
const (
	reconcileRetry    = time.Second
	reconcileMaxSleep = time.Minute
)

// wait is how long the enqueuer sleeps after a run that ended with err: until the next period
// begins, or reconcileRetry after a failure, within its bounds.
func (r *reconcileEnqueuer) wait(err error) time.Duration {
	if err != nil {
		return reconcileRetry
	}
	now := r.clock.Now()
	next := periodStart(now, r.every).Add(r.every)
	return min(max(next.Sub(now), reconcileRetry), reconcileMaxSleep)
}

// runOnce enqueues the current period's reconciliation, except in the period the process started
// in: reconciling at start-up is the binary's job (Engine.Reconcile before it serves), and every
// restart would otherwise run one more.
func (r *reconcileEnqueuer) runOnce(ctx context.Context) error {
	start := periodStart(r.clock.Now(), r.every)
	r.once.Do(func() { r.first = start })
	if !start.After(r.first) || start.UnixMilli() <= r.done.Load() {
		return nil
	}
	if err := r.enqueue(ctx, start); err != nil {
		return err
	}
	r.done.Store(start.UnixMilli())
	return nil
}
