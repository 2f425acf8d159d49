package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// TypeDeliver is the task of one attempt of an event's delivery to one sink.
const TypeDeliver = "event:deliver"

// deliveryTimeout bounds one attempt: the receiver has 10 s, and the database some more.
const deliveryTimeout = 30 * time.Second

// deliveryMaxRetry bounds the task's own retries, which happen only when an attempt could not be
// made or recorded (a backend away); the engine schedules the retries of a receiver's failures
// itself, and its requeue loop picks up a task that ran out of these.
const deliveryMaxRetry = 10

// NotifyQueue is the queue of deliveries, apart from releases so that a slow receiver never delays
// a release.
func (j *Jobs) NotifyQueue() string { return j.opts.Queue + "_notify" }

type deliveryPayload struct {
	DeliveryID uint64 `json:"delivery_id"`
}

// DeliveryTaskID names the task of one attempt of a delivery.
func DeliveryTaskID(deliveryID uint64, key string) string {
	return fmt.Sprintf("deliver:%d:%s", deliveryID, key)
}

// ScheduleDelivery queues an attempt of a delivery at at; a task of the same delivery and key
// already there counts as success.
func (j *Jobs) ScheduleDelivery(ctx context.Context, deliveryID uint64, key string, at time.Time) error {
	payload, _ := json.Marshal(deliveryPayload{DeliveryID: deliveryID})
	err := j.enqueue(ctx, asynq.NewTask(TypeDeliver, payload),
		asynq.TaskID(DeliveryTaskID(deliveryID, key)),
		asynq.Queue(j.NotifyQueue()),
		asynq.MaxRetry(deliveryMaxRetry),
		asynq.Timeout(deliveryTimeout),
		asynq.ProcessAt(at),
	)
	if err != nil {
		return fmt.Errorf("schedule delivery %d: %w", deliveryID, err)
	}
	return nil
}

// deliver runs one attempt of a delivery.
func (h *handlers) deliver(ctx context.Context, t *asynq.Task) error {
	var p deliveryPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || p.DeliveryID == 0 {
		return fmt.Errorf("%s: bad payload %q: %w", TypeDeliver, t.Payload(), asynq.SkipRetry)
	}
	return h.notify.Deliver(ctx, p.DeliveryID)
}

// notifier is what the delivery handler needs of *engine.Engine.
type notifier interface {
	Deliver(ctx context.Context, deliveryID uint64) error
}
