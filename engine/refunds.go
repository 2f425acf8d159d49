package engine

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/wire"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
	"github.com/slotwheel/slotwheel/models"
)

// Refunds are durable work: a row written with the change that decided it (engine/booking says how
// much: the cancel cut-off, the no-show share, a payment that booked nothing), announced as
// refund.requested, then sent to the provider that took the money — WeChat Pay, through a task with
// retries, idempotent by out_refund_no — and settled by its notification (refund.succeeded or
// refund.failed). A payment that came through /payments/notify, or WeChat Pay not configured, leaves
// the refund requested for someone to handle by hand.

// RefundProvider asks a payment provider for money back (the WeChat Pay adapter implements it).
type RefundProvider interface {
	// Name is the provider whose payments it refunds (models.ProviderWechatPay).
	Name() string
	// RequestRefund asks for r's refund, idempotently by r.OutRefundNo. It answers the provider's id of
	// the refund, and settled when the answer already says how it ended (status and a reason).
	RequestRefund(ctx context.Context, r models.Refund) (providerID string, settled *RefundOutcome, err error)
}

// RefundOutcome is how a refund ended at the provider.
type RefundOutcome struct {
	Succeeded bool
	Detail    string
}

// RefundScheduler puts refund tasks into the durable queue (jobs/ implements it).
type RefundScheduler interface {
	ScheduleRefund(ctx context.Context, refundID uint64, key string) error
}

// refundView is a refund as the API shows it, its times in loc: the zone of the refund's venue, as
// every time the API answers is (UTC for a refund of no known venue).
func refundView(r models.Refund, loc *time.Location) wire.Refund {
	out := wire.Refund{RefundID: wire.ID(r.ID), HoldID: r.HoldID, PaymentID: r.PaymentID, Provider: r.Provider,
		PaidCents: r.PaidCents, AmountCents: r.AmountCents, Reason: r.Reason, Status: r.Status,
		ProviderRefundID: r.ProviderRefundID, CreatedAt: wire.Time(r.CreatedAt.In(loc)), UpdatedAt: wire.Time(r.UpdatedAt.In(loc))}
	if r.BookingID != nil {
		id := wire.ID(*r.BookingID)
		out.BookingID = &id
	}
	return out
}

// ListRefunds lists refunds, newest first, optionally of one status. Admin only.
func (ps *Payments) ListRefunds(ctx context.Context, a booking.Actor, status, cursor string, limit int) ([]wire.Refund, string, error) {
	if err := a.RequireAdmin(); err != nil {
		return nil, "", err
	}
	switch status {
	case "", models.RefundRequested, models.RefundSucceeded, models.RefundFailed:
	default:
		return nil, "", booking.Invalid("invalid_status", "status must be requested, succeeded or failed").WithField("status")
	}
	page, err := sqlstore.ParsePage(cursor, limit)
	if err != nil {
		return nil, "", err
	}
	rows, err := ps.ss.Refunds(ctx, sqlstore.RefundQuery{Status: status, Page: page})
	if err != nil {
		return nil, "", err
	}
	rows, next := sqlstore.NextPage(page, rows, func(r models.Refund) uint64 { return r.ID })
	out := make([]wire.Refund, len(rows))
	for i, r := range rows {
		out[i] = refundView(r, ps.cat.Zone(ctx, r.VenueID))
	}
	return out, next, nil
}

// SendRefund asks the provider of a requested refund for the money (a refund task's work). A refund
// no provider can send — a payment that came through /payments/notify, or WeChat Pay not configured
// — stays requested for manual handling. An error means: try again later.
func (ps *Payments) SendRefund(ctx context.Context, refundID uint64) error {
	r, err := ps.ss.Refund(ctx, refundID)
	if errors.Is(err, booking.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	p := ps.refunds
	if r.Status != models.RefundRequested || p == nil || p.Name() != r.Provider {
		return nil
	}
	providerID, outcome, err := p.RequestRefund(ctx, r)
	now := ps.clock.Now()
	if err != nil {
		if rerr := ps.ss.RefundSent(ctx, r.ID, "", err.Error(), now); rerr != nil {
			ps.log.Warn("record refund error failed", "refund_id", r.ID, "err", rerr)
		}
		return err
	}
	if outcome == nil {
		return ps.ss.RefundSent(ctx, r.ID, providerID, "", now)
	}
	_, err = ps.SettleRefund(ctx, r.OutRefundNo, providerID, *outcome)
	return err
}

// SettleRefund records how the provider says a refund (by out_refund_no) ended, once, with its
// refund.succeeded or refund.failed event; a repeat changes nothing. It answers whether the refund
// is known.
func (ps *Payments) SettleRefund(ctx context.Context, outRefundNo, providerID string, o RefundOutcome) (bool, error) {
	r, err := ps.ss.RefundByOutNo(ctx, outRefundNo)
	if errors.Is(err, booking.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ps.cat.Zone(ctx, r.VenueID) // its event renders in the venue's zone, from the catalog's cache
	status := models.RefundSucceeded
	if !o.Succeeded {
		status = models.RefundFailed
	}
	_, _, err = ps.ss.SettleRefund(ctx, r.ID, status, providerID, o.Detail, ps.clock.Now())
	return true, err
}

// queueRefunds hands requested refunds a provider can send to the queue: the new ones (decided in a
// transaction, which queues nothing itself) once, and those stuck for a while again (their task ran
// out of retries, or was lost with Redis). It runs as a loop, every couple of seconds.
func (ps *Payments) queueRefunds(ctx context.Context) error {
	p := ps.refunds
	sched, ok := ps.sched.(RefundScheduler)
	if p == nil || !ok {
		return nil
	}
	now := ps.clock.Now()
	fresh, err := ps.ss.RequestedRefunds(ctx, p.Name(), true, now, 500)
	if err != nil {
		return err
	}
	stuck, err := ps.ss.RequestedRefunds(ctx, p.Name(), false, now.Add(-refundStuckAfter), 100)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range fresh {
		errs = append(errs, sched.ScheduleRefund(ctx, r.ID, "first"))
	}
	// A new key per period: a finished or archived task keeps its id for a while.
	key := "again-" + strconv.FormatInt(now.Unix()/int64(refundStuckAfter/time.Second), 10)
	for _, r := range stuck {
		errs = append(errs, sched.ScheduleRefund(ctx, r.ID, key))
	}
	return errors.Join(errs...)
}

// refundStuckAfter is how long a requested refund waits before it is queued again: WeChat answers a
// repeated out_refund_no with the same refund, so a repeat is harmless.
const refundStuckAfter = 5 * time.Minute
