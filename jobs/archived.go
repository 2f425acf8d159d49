package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/hibiken/asynq"
)

// resolveArchived settles archived (dead-letter) release tasks, which Asynq would otherwise keep
// for 90 days and drop silently past 10,000: a task whose booking no longer waits for that release
// is deleted. Any other is left where it is, for an operator to read its error and re-drive it
// (Redrive, from the back office): the release loop and the overdue sweep release its booking
// whatever happens to the task, and once they have, the next pass deletes it. Running it again
// blindly would only hide what keeps failing; this keeps the dead letters meaning something.
func (j *Jobs) resolveArchived(ctx context.Context) error {
	var errs []error
	for _, q := range j.ReleaseQueues() {
		tasks, err := j.inspector.ListArchivedTasks(q, asynq.PageSize(200))
		if errors.Is(err, asynq.ErrQueueNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("list archived tasks of %s: %w", q, err))
			continue
		}
		for _, t := range tasks {
			if err := ctx.Err(); err != nil {
				return err
			}
			errs = append(errs, j.resolveTask(ctx, q, t))
		}
	}
	return errors.Join(errs...)
}

func (j *Jobs) resolveTask(ctx context.Context, queue string, t *asynq.TaskInfo) error {
	if t.Type != TypeRelease {
		return nil
	}
	ref, err := decodeRef(t.Payload)
	if err != nil {
		archivedResolved.WithLabelValues("deleted").Inc()
		return j.inspector.DeleteTask(queue, t.ID) // a payload nobody can run
	}
	needed, err := j.eng.NeedsRelease(ctx, ref)
	if err != nil {
		return err
	}
	if !needed {
		archivedResolved.WithLabelValues("deleted").Inc()
		return ignoreGone(j.inspector.DeleteTask(queue, t.ID))
	}
	return nil
}

// ignoreGone treats a task that another instance resolved meanwhile as resolved.
func ignoreGone(err error) error {
	if errors.Is(err, asynq.ErrTaskNotFound) {
		return nil
	}
	return err
}
