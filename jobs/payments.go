package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/slotwheel/slotwheel/engine"
)

// Task types of payment providers' work: closing the order of a hold that ended unpaid, and asking
// for a refund. They share the notify queue with deliveries: work for systems outside slotwheel, apart
// from releases.
const (
	TypeCloseOrder = "payment:close_order"
	TypeSendRefund = "payment:refund"
)

// paymentMaxRetry bounds a payment task's retries (1 s to 1 min apart); the engine's sweeps queue a
// refund again later, and a paid order's notification books or refunds it whatever the close did.
const paymentMaxRetry = 12

var (
	_ engine.PaymentScheduler = (*Jobs)(nil)
	_ engine.RefundScheduler  = (*Jobs)(nil)
)

type closeOrderPayload struct {
	HoldID string `json:"hold_id"`
}

type refundPayload struct {
	RefundID uint64 `json:"refund_id"`
}

// ScheduleCloseOrder queues the closing of a hold's order, once per hold.
func (j *Jobs) ScheduleCloseOrder(ctx context.Context, holdID string) error {
	payload, _ := json.Marshal(closeOrderPayload{HoldID: holdID})
	err := j.enqueue(ctx, asynq.NewTask(TypeCloseOrder, payload), asynq.TaskID("close:"+holdID),
		asynq.Queue(j.NotifyQueue()), asynq.MaxRetry(paymentMaxRetry), asynq.Timeout(30*time.Second), asynq.Retention(time.Hour))
	if err != nil {
		return fmt.Errorf("schedule close of hold %s's order: %w", holdID, err)
	}
	return nil
}

// ScheduleRefund queues a refund request; key tells the attempts of one refund apart.
func (j *Jobs) ScheduleRefund(ctx context.Context, refundID uint64, key string) error {
	payload, _ := json.Marshal(refundPayload{RefundID: refundID})
	err := j.enqueue(ctx, asynq.NewTask(TypeSendRefund, payload), asynq.TaskID(fmt.Sprintf("refund:%d:%s", refundID, key)),
		asynq.Queue(j.NotifyQueue()), asynq.MaxRetry(paymentMaxRetry), asynq.Timeout(30*time.Second))
	if err != nil {
		return fmt.Errorf("schedule refund %d: %w", refundID, err)
	}
	return nil
}

// payer is what the payment handlers need of *engine.Engine.
type payer interface {
	CloseWechatOrder(ctx context.Context, holdID string) error
	SendRefund(ctx context.Context, refundID uint64) error
}

func (h *handlers) closeOrder(ctx context.Context, t *asynq.Task) error {
	var p closeOrderPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || p.HoldID == "" {
		return fmt.Errorf("%s: bad payload %q: %w", TypeCloseOrder, t.Payload(), asynq.SkipRetry)
	}
	return h.pay.CloseWechatOrder(ctx, p.HoldID)
}

func (h *handlers) sendRefund(ctx context.Context, t *asynq.Task) error {
	var p refundPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || p.RefundID == 0 {
		return fmt.Errorf("%s: bad payload %q: %w", TypeSendRefund, t.Payload(), asynq.SkipRetry)
	}
	return h.pay.SendRefund(ctx, p.RefundID)
}
