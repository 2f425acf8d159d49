package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// TypeDeliver is the task of one event's delivery to one sink.
const TypeDeliver = "event:deliver"

// deliveryBackoff is the wait before each retry of a delivery: the first within 10 s (API.md), and
// retries for over 24 hours in all (86,625 s) before the delivery is kept as failed.
var deliveryBackoff = []time.Duration{
	5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute,
	10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour,
	8 * time.Hour, 8 * time.Hour,
}

// deliveryTimeout bounds one attempt: the receiver has 10 s, and the database some more.
const deliveryTimeout = 30 * time.Second

// NotifyQueue is the queue of deliveries, apart from releases so that a slow receiver never delays
// a release.
func (j *Jobs) NotifyQueue() string { return j.opts.Queue + "_notify" }

type deliveryPayload struct {
	DeliveryID uint64 `json:"delivery_id"`
}

// DeliveryTaskID names the task of a delivery's attempt series: a manual retry starts a new one.
func DeliveryTaskID(deliveryID uint64, attempt int) string {
	return fmt.Sprintf("deliver:%d:%d", deliveryID, attempt)
}

// ScheduleDelivery queues a delivery now; a task already there counts as success.
func (j *Jobs) ScheduleDelivery(ctx context.Context, deliveryID uint64, attempt int) error {
	payload, _ := json.Marshal(deliveryPayload{DeliveryID: deliveryID})
	err := j.enqueue(ctx, asynq.NewTask(TypeDeliver, payload),
		asynq.TaskID(DeliveryTaskID(deliveryID, attempt)),
		asynq.Queue(j.NotifyQueue()),
		asynq.MaxRetry(len(deliveryBackoff)),
		asynq.Timeout(deliveryTimeout),
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
	retried, _ := asynq.GetRetryCount(ctx)
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	// A failed attempt (engine.ErrDeliveryRetry) is retried along deliveryBackoff; the last one is
	// recorded as failed by the engine, which keeps it listed.
	return h.notify.Deliver(ctx, p.DeliveryID, retried >= maxRetry)
}

// notifier is what the delivery handler needs of *engine.Engine.
type notifier interface {
	Deliver(ctx context.Context, deliveryID uint64, last bool) error
}
