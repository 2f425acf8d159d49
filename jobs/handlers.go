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
	"github.com/slotwheel/slotwheel/engine/release"
)

// releaser, reconciler and their methods are what the handlers need of *engine.Engine.
type releaser interface {
	ReleaseTask(ctx context.Context, ref release.Ref) (release.Outcome, error)
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
	log    *slog.Logger
}

// release moves a no-show booking to RELEASED at its release_at, never before (the release
// service's Task, which waits out an early start). A task still early past that wait is handed back
// to Asynq, which retries it close to release_at (retryDelay) without using up a retry.
func (h *handlers) release(ctx context.Context, t *asynq.Task) error {
	ref, err := decodeRef(t.Payload())
	if err != nil {
		releases.WithLabelValues("bad_payload").Inc()
		return fmt.Errorf("%s: %w: %w", TypeRelease, err, asynq.SkipRetry)
	}
	if n, ok := asynq.GetRetryCount(ctx); ok && n > 0 {
		ref.Retried = true
	}
	outcome, err := h.rel.ReleaseTask(ctx, ref)
	if _, early := errors.AsType[*booking.NotDueError](err); early {
		releases.WithLabelValues("early").Inc()
	} else if err != nil {
		releases.WithLabelValues("error").Inc()
	}
	if err != nil {
		return fmt.Errorf("release booking %d: %w", ref.BookingID, err)
	}
	releases.WithLabelValues(string(outcome)).Inc()
	return nil
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
