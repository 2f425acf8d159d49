package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/slotwheel/slotwheel/engine/release"
)

// Task types.
const (
	TypeRelease   = "booking:release"
	TypeReconcile = "reconcile"
)

// releaseMaxRetry bounds a release task's retries; an exhausted task is archived and reconciliation
// releases the booking anyway.
const releaseMaxRetry = 8

// releaseTimeout bounds one run of a release handler: at most ~5 s of waiting out an early start and
// one engine call.
const releaseTimeout = time.Minute

// A release task's payload is its booking's ref, "<booking_id>:<release_at in Unix ms>": ids only,
// so that a task never carries state that could go stale (the engine reads the booking itself), and
// short, because every booking within the horizon keeps one task in Redis. Its task ID is the same
// ref behind "release:". Tasks queued by versions before 2026-12 carry it as JSON
// ({"booking_id":…,"release_at_ms":…}), which is still read.
func encodeRef(ref release.Ref) []byte {
	b := append(strconv.AppendUint(make([]byte, 0, 34), ref.BookingID, 10), ':')
	return strconv.AppendInt(b, ref.ReleaseAt.UnixMilli(), 10)
}

func decodeRef(b []byte) (release.Ref, error) {
	var p struct {
		BookingID   uint64 `json:"booking_id"`
		ReleaseAtMs int64  `json:"release_at_ms"`
	}
	if bytes.HasPrefix(b, []byte("{")) {
		if err := json.Unmarshal(b, &p); err != nil {
			return release.Ref{}, fmt.Errorf("decode payload: %w", err)
		}
	} else {
		id, at, ok := strings.Cut(string(b), ":")
		var err1, err2 error
		p.BookingID, err1 = strconv.ParseUint(id, 10, 64)
		p.ReleaseAtMs, err2 = strconv.ParseInt(at, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return release.Ref{}, fmt.Errorf("decode payload: want <booking_id>:<release_at_ms>, got %q", b)
		}
	}
	if p.BookingID == 0 || p.ReleaseAtMs <= 0 {
		return release.Ref{}, fmt.Errorf("decode payload: booking_id and release_at_ms are required: %s", b)
	}
	return release.Ref{BookingID: p.BookingID, ReleaseAt: time.UnixMilli(p.ReleaseAtMs).UTC()}, nil
}

// ReleaseTaskID is the Asynq task ID of a release: one per booking and release_at, so scheduling twice
// is a no-op and a restored booking (new release_at) gets a new task.
func ReleaseTaskID(ref release.Ref) string {
	return "release:" + string(encodeRef(ref))
}

// ReconcileTaskID is the Asynq task ID of the reconciliation of the period starting at start, so that
// every instance's enqueuer puts one task per period into the queue.
func ReconcileTaskID(start time.Time) string {
	return fmt.Sprintf("reconcile:%d", start.Unix())
}

// ScheduleRelease queues the release task of ref on the booking's release queue. The engine's
// release loop releases bookings to the millisecond; the task is the durable timer behind it, for
// when no instance runs the loop or the loop falls behind. Asynq keeps scheduled times in whole
// seconds and may start a task up to a second before the one it stores, so the task is due at the
// first whole second at or after release_at: it does not start early, and rarely finds its booking
// still undecided. A task already queued counts as success; added says whether this call queued it.
func (j *Jobs) ScheduleRelease(ctx context.Context, ref release.Ref) (added bool, err error) {
	task := asynq.NewTask(TypeRelease, encodeRef(ref))
	added, err = j.enqueueOnce(ctx, task,
		asynq.TaskID(ReleaseTaskID(ref)),
		asynq.Queue(j.queueOf(ref.BookingID)),
		asynq.MaxRetry(releaseMaxRetry),
		asynq.Timeout(releaseTimeout),
		asynq.ProcessAt(taskTime(ref.ReleaseAt)),
	)
	if err != nil {
		return false, fmt.Errorf("schedule release of booking %d: %w", ref.BookingID, err)
	}
	return added, nil
}

// taskTime is the first whole second at or after t.
func taskTime(t time.Time) time.Time {
	if w := t.Truncate(time.Second); !w.Equal(t) {
		return w.Add(time.Second)
	}
	return t
}

// enqueue puts a task into its queue; a task with the same ID already there is success.
func (j *Jobs) enqueue(ctx context.Context, task *asynq.Task, opts ...asynq.Option) error {
	_, err := j.enqueueOnce(ctx, task, opts...)
	return err
}

// enqueueOnce is enqueue that also says whether the task was added (false: its ID was there).
func (j *Jobs) enqueueOnce(ctx context.Context, task *asynq.Task, opts ...asynq.Option) (bool, error) {
	_, err := j.client.EnqueueContext(ctx, task, opts...)
	switch {
	case err == nil:
		tasksScheduled.WithLabelValues(task.Type(), "enqueued").Inc()
		return true, nil
	case errors.Is(err, asynq.ErrTaskIDConflict):
		tasksScheduled.WithLabelValues(task.Type(), "already_queued").Inc()
		return false, nil
	default:
		return false, err
	}
}

// CancelRelease removes the release task of ref. A task already gone is fine; so is a release task
// running right now, whose handler will find the booking no longer releasable.
func (j *Jobs) CancelRelease(ctx context.Context, ref release.Ref) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := j.deleteTask(j.queueOf(ref.BookingID), ReleaseTaskID(ref)); err != nil {
		return fmt.Errorf("cancel release of booking %d: %w", ref.BookingID, err)
	}
	return nil
}

func (j *Jobs) deleteTask(queue, id string) error {
	err := j.inspector.DeleteTask(queue, id)
	if err == nil || errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
		return nil
	}
	// Asynq refuses to delete an active task; the running handler is harmless (it calls Release,
	// which does nothing to a booking that is no longer CONFIRMED at that release_at).
	if info, ierr := j.inspector.GetTaskInfo(queue, id); ierr == nil && info.State == asynq.TaskStateActive {
		return nil
	}
	return fmt.Errorf("delete task %s: %w", id, err)
}

// enqueueReconcile queues the reconciliation of the period starting at start. Its ID names the
// period, and the completed task is retained for a period, so however many instances enqueue it,
// the period gets one reconciliation.
func (j *Jobs) enqueueReconcile(ctx context.Context, start time.Time) error {
	every := j.opts.ReconcileEvery
	return j.enqueue(ctx, asynq.NewTask(TypeReconcile, nil),
		asynq.TaskID(ReconcileTaskID(start)),
		asynq.Queue(j.MaintQueue()),
		asynq.MaxRetry(3),
		asynq.Timeout(every),
		asynq.Retention(every),
	)
}
