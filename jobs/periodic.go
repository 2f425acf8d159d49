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
// a moment later would enqueue again. Instead every instance, every second, enqueues the current
// period's task under the period's ID (the "reconcile_enqueuer" loop); all but the first get
// ErrTaskIDConflict, and a failed enqueue is simply tried again a second later. A period whose task
// this instance enqueued (or found there) is not asked about again: an idle instance's loop costs
// Redis one round trip a period, not one a second.
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
