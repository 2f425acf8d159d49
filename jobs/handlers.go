package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/engine/loop"
	"github.com/slotwheel/slotwheel/engine/release"
)

// maxEarlyWait is the longest a release handler waits out an early start before handing the task
// back to Asynq. A task is due at the whole second after release_at and should not start early; one
// that does (clock skew between instances, a task queued before this schedule) waits, and anything
// earlier still (an operator pressing "run" in the dashboard) is retried close to release_at
// instead of holding a worker.
const maxEarlyWait = 5 * time.Second

// releaser, reconciler and their methods are what the handlers need of *engine.Engine.
type releaser interface {
	Release(ctx context.Context, ref release.Ref) (release.Outcome, error)
}

type reconciler interface {
	Reconcile(ctx context.Context) (engine.ReconcileReport, error)
}

// handlers are the Asynq task handlers. Each decodes ids, calls one engine method and returns its
// error; Asynq retries failures with backoff and archives exhausted tasks, which reconciliation
// picks up.
type handlers struct {
	rel    releaser
	rec    reconciler
	notify notifier
	pay    payer
	clock  clock.Clock
	log    *slog.Logger
}

// release moves a no-show booking to RELEASED at its release_at, never before: the handler waits
// until the release_at of its payload, and should the engine still find it early (another clock),
// the engine says how long is left and the handler waits that out too.
func (h *handlers) release(ctx context.Context, t *asynq.Task) error {
	ref, err := decodeRef(t.Payload())
	if err != nil {
		releases.WithLabelValues("bad_payload").Inc()
		return fmt.Errorf("%s: %w: %w", TypeRelease, err, asynq.SkipRetry)
	}
	if n, ok := asynq.GetRetryCount(ctx); ok && n > 0 {
		ref.Retried = true
	}
	// Should the task start early, wait for the release_at it names before asking the engine, so an
	// early start costs the database nothing; the engine stays the judge of "due".
	budget := maxEarlyWait
	if early := ref.ReleaseAt.Sub(h.clock.Now()); early > 0 {
		if early > budget {
			releases.WithLabelValues("early").Inc()
			return fmt.Errorf("release booking %d: %w", ref.BookingID, &booking.NotDueError{Wait: early})
		}
		budget -= early
		if err := loop.Sleep(ctx, early); err != nil {
			return fmt.Errorf("release booking %d: %w", ref.BookingID, err)
		}
	}
	for {
		outcome, err := h.rel.Release(ctx, ref)
		if nd, ok := errors.AsType[*booking.NotDueError](err); ok {
			wait := max(nd.Wait, time.Millisecond)
			if wait > budget {
				releases.WithLabelValues("early").Inc()
				return fmt.Errorf("release booking %d: %w", ref.BookingID, err)
			}
			budget -= wait
			if err := loop.Sleep(ctx, wait); err != nil {
				return fmt.Errorf("release booking %d: %w", ref.BookingID, err)
			}
			continue
		}
		if err != nil {
			releases.WithLabelValues("error").Inc()
			return fmt.Errorf("release booking %d: %w", ref.BookingID, err)
		}
		releases.WithLabelValues(string(outcome)).Inc()
		return nil
	}
}

// reconcile runs one reconciliation and logs what it repaired.
func (h *handlers) reconcile(ctx context.Context, _ *asynq.Task) error {
	rep, err := h.rec.Reconcile(ctx)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	h.log.Info("reconciled",
		"overdue_released", rep.OverdueReleased,
		"owners_added", rep.OwnersAdded,
		"owners_removed", rep.OwnersRemoved,
		"counter_drift", rep.CounterDrift,
		"holds_requeued", rep.HoldsRequeued,
		"holds_settled", rep.HoldsSettled,
		"tasks_scheduled", rep.TasksScheduled,
		"inventory_days", rep.InventoryDays,
		"confirming_resumed", rep.ConfirmingResumed,
	)
	return nil
}

// retryDelay backs off exponentially from 1 s to 1 min (n is how often the task was retried
// already). A release that started far too early is retried a second before it is due instead, as
// if it had been scheduled then.
func retryDelay(n int, err error, _ *asynq.Task) time.Duration {
	if nd, ok := errors.AsType[*booking.NotDueError](err); ok {
		return max(nd.Wait-time.Second, 0)
	}
	return min(time.Second<<min(max(n, 0), 6), time.Minute)
}

// isFailure tells Asynq which errors use up a retry: starting early is not the task's fault, so it
// must not run a task into the archive.
func isFailure(err error) bool {
	_, early := errors.AsType[*booking.NotDueError](err)
	return !early
}
