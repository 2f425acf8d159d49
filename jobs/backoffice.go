package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hibiken/asynq"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/release"
)

// The task queue as the back office sees it (engine.TaskQueue): counts by state, the retrying and
// dead-letter tasks with what they are about, and a re-drive that runs a task's work through the
// engine now — the handler's own engine call, not a raw Asynq retry that would wait for a worker
// and count against the task's retries.

var _ engine.TaskQueue = (*Jobs)(nil)

// queues are every queue the jobs use.
func (j *Jobs) queues() []string {
	return append(slices.Clone(j.ReleaseQueues()), j.NotifyQueue(), j.MaintQueue())
}

// QueueCounts answers each queue's tasks by state; a queue Asynq has not seen yet counts zero.
func (j *Jobs) QueueCounts(ctx context.Context) ([]engine.QueueCount, error) {
	// GetQueueInfo's error for a queue not seen yet is not ErrQueueNotFound: ask which exist.
	known, err := j.inspector.Queues()
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	var out []engine.QueueCount
	for _, q := range j.queues() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c := engine.QueueCount{Queue: q}
		if slices.Contains(known, q) {
			info, err := j.inspector.GetQueueInfo(q)
			if err != nil {
				return nil, fmt.Errorf("queue %s: %w", q, err)
			}
			c.Pending, c.Active, c.Scheduled, c.Retry, c.Archived, c.Complete =
				info.Pending, info.Active, info.Scheduled, info.Retry, info.Archived, info.Completed
		}
		out = append(out, c)
	}
	return out, nil
}

// Tasks lists up to limit tasks in state (retry or archived) across the queues, the latest failure
// first.
func (j *Jobs) Tasks(ctx context.Context, state string, limit int) ([]engine.Task, error) {
	list := j.inspector.ListRetryTasks
	if state == "archived" {
		list = j.inspector.ListArchivedTasks
	}
	out := []engine.Task{}
	for _, q := range j.queues() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		tasks, err := list(q, asynq.PageSize(limit))
		if errors.Is(err, asynq.ErrQueueNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list %s tasks of %s: %w", state, q, err)
		}
		for _, t := range tasks {
			out = append(out, taskView(t))
		}
	}
	slices.SortFunc(out, func(a, b engine.Task) int { return b.LastFailedAt.Compare(a.LastFailedAt) })
	return out[:min(len(out), limit)], nil
}

// Redrive runs task id of queue now: a release through the engine's release of its booking (never
// early: a release not due yet fails with the time left), any other task through its handler. On
// success the task is deleted; on failure it stays as it was, for Asynq's own retry or another
// re-drive.
func (j *Jobs) Redrive(ctx context.Context, queue, id string) (engine.Redrive, error) {
	if !slices.Contains(j.queues(), queue) {
		return engine.Redrive{}, booking.ErrNotFound
	}
	t, err := j.inspector.GetTaskInfo(queue, id)
	if errors.Is(err, asynq.ErrQueueNotFound) || errors.Is(err, asynq.ErrTaskNotFound) {
		return engine.Redrive{}, booking.ErrNotFound
	}
	if err != nil {
		return engine.Redrive{}, fmt.Errorf("read task %s of %s: %w", id, queue, err)
	}
	out := engine.Redrive{Task: taskView(t)}
	if t.State == asynq.TaskStateActive {
		out.Error = "the task is running now"
		return out, nil
	}
	if ref, derr := decodeRef(t.Payload); t.Type == TypeRelease && derr == nil {
		// Not through the handler: the back office is told the release's outcome.
		var outcome release.Outcome
		outcome, err = j.handlers.rel.ReleaseTask(ctx, ref)
		out.Outcome = string(outcome)
	} else {
		// Any other task, and a release whose payload cannot be read (its handler says so).
		err = j.mux().ProcessTask(ctx, asynq.NewTask(t.Type, t.Payload))
	}
	if err != nil {
		out.Error = err.Error()
		return out, nil
	}
	if err := ignoreGone(j.inspector.DeleteTask(queue, id)); err != nil {
		return out, fmt.Errorf("delete re-driven task %s of %s: %w", id, queue, err)
	}
	out.Done = true
	return out, nil
}

func taskView(t *asynq.TaskInfo) engine.Task {
	v := engine.Task{Queue: t.Queue, ID: t.ID, Type: t.Type, State: t.State.String(), Retried: t.Retried, MaxRetry: t.MaxRetry,
		LastError: t.LastErr, LastFailedAt: t.LastFailedAt, NextProcessAt: t.NextProcessAt}
	if t.Type == TypeRelease {
		if ref, err := decodeRef(t.Payload); err == nil {
			v.BookingID, v.ReleaseAt = ref.BookingID, ref.ReleaseAt
			return v
		}
	}
	// Other payloads are ids (a delivery, a refund, an order): short text, shown as is.
	v.Subject = string(t.Payload[:min(len(t.Payload), 64)])
	return v
}
