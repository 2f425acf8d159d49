package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/wechatpay"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
	"github.com/slotwheel/slotwheel/models"
)

// WeChat Pay (API v3, JSAPI) as a payment provider (docs/API.md "Payments with WeChat Pay"): an
// order per hold, whose wx.requestPayment parameters the mini-program gets; notifications that
// confirm the hold as /payments/notify does, deduplicated by transaction_id; the order closed when
// the hold ends unpaid; refunds requested through the refund API and settled by its notifications.
// The protocol is engine/wechatpay's; this file decides what a payment means for a hold.

// PaymentScheduler puts provider work into the durable queue (jobs/ implements it).
type PaymentScheduler interface {
	// ScheduleCloseOrder queues the closing of a hold's order.
	ScheduleCloseOrder(ctx context.Context, holdID string) error
}

// outTradeNo is the out_trade_no of a hold's order: the hold id's random part, which is unique, and
// fits WeChat's 6–32 characters of [A-Za-z0-9_-].
func outTradeNo(holdID string) string {
	_, tail, _ := strings.Cut(holdID, "_")
	return "sw" + tail
}

// WechatPayParams answers what wx.requestPayment takes to pay a live hold, from the hold's JSAPI
// order (made on the first request, reused after). Owner only: the order's payer is their openid.
func (ps *Payments) WechatPayParams(ctx context.Context, a booking.Actor, holdID string) (wechatpay.RequestPayment, error) {
	c := ps.wechatPay
	if c == nil {
		return wechatpay.RequestPayment{}, booking.ErrWechatPayOff
	}
	r, err := ps.holds.readHold(ctx, holdID)
	if errors.Is(err, booking.ErrNotFound) {
		// A paid hold's record is gone: its booking answers for it.
		if b, ok, berr := ps.ss.BookingByHold(ctx, holdID); berr == nil && ok && a.Owns(b.UserID) {
			return wechatpay.RequestPayment{}, booking.ErrHoldNotActive
		}
	}
	if err != nil {
		return wechatpay.RequestPayment{}, err
	}
	if !a.Owns(r.UserID) {
		return wechatpay.RequestPayment{}, booking.ErrNotFound
	}
	openid, ok := booking.WechatOpenID(r.UserID)
	if !ok {
		return wechatpay.RequestPayment{}, booking.ErrWechatLoginNeeded
	}
	switch r.Effective(ps.clock.Now()) {
	case booking.HoldHeld:
	case booking.HoldExpired:
		return wechatpay.RequestPayment{}, booking.ErrHoldExpired
	default:
		return wechatpay.RequestPayment{}, booking.ErrHoldNotActive
	}
	o, err := ps.ss.OrderByHold(ctx, holdID)
	if errors.Is(err, booking.ErrNotFound) {
		o, err = ps.openOrder(ctx, c, openid, r.ID, r.AmountCents, r.Deadline, ps.orderDescription(ctx, r.ResourceID))
	}
	if err != nil {
		return wechatpay.RequestPayment{}, err
	}
	if err := ps.rs.SetOrderNo(ctx, r.VenueID, r.ID, o.OutTradeNo); err != nil {
		return wechatpay.RequestPayment{}, err
	}
	return c.PaymentParams(o.PrepayID), nil
}

// openOrder places the hold's JSAPI order at WeChat Pay and records it. WeChat answers a repeat of
// the same order with the same prepay_id, so two requests racing make one order.
func (ps *Payments) openOrder(ctx context.Context, c *wechatpay.Client, openid, holdID string, amount int64, deadline time.Time, desc string) (o models.WechatOrder, err error) {
	no := outTradeNo(holdID)
	prepay, err := c.CreateJSAPIOrder(ctx, wechatpay.JSAPIOrder{OutTradeNo: no, Description: desc, AmountCents: amount,
		PayerOpenID: openid, TimeExpire: deadline, Attach: holdID})
	if err != nil {
		return o, errors.Join(booking.ErrBackendUnavailable, fmt.Errorf("wechat pay order for hold %s: %w", holdID, err))
	}
	return ps.ss.CreateOrder(ctx, sqlstore.NewOrder{HoldID: holdID, OutTradeNo: no, PrepayID: prepay, OpenID: openid,
		AmountCents: amount, ExpiresAt: deadline}, ps.clock.Now())
}

// orderDescription is what the payer sees: the resource's name, within WeChat's 127 characters.
func (ps *Payments) orderDescription(ctx context.Context, resourceID uint64) string {
	desc := "Booking"
	if ri, err := ps.cat.Resource(ctx, resourceID); err == nil {
		desc = ri.Venue.Venue.Name + " " + ri.Resource.Name
	}
	for utf8.RuneCountInString(desc) > 127 {
		_, n := utf8.DecodeLastRuneInString(desc)
		desc = desc[:len(desc)-n]
	}
	return desc
}

// WechatPayNotify handles one WeChat Pay notification exactly as received. It is verified (the
// signature under the key its Wechatpay-Serial names, a timestamp within 5 minutes) and decrypted
// first: anything that fails is ErrNotificationRefuse and changes nothing. A paid transaction confirms
// its hold as Pay does (a payment of another amount than the order's is recorded for refund); a
// refund's outcome settles the refund. nil means: acknowledge. The same notification again — WeChat
// resends one until it hears success, byte for byte when its first delivery's answer was lost — is
// acknowledged and changes nothing: payments are deduplicated by transaction_id and refunds settle
// once. A captured notification cannot be replayed to any effect, and not at all past the 5 minutes.
func (ps *Payments) WechatPayNotify(ctx context.Context, h http.Header, body []byte) error {
	c := ps.wechatPay
	if c == nil {
		return booking.ErrWechatPayOff
	}
	n, err := c.ParseNotification(h, body)
	if err != nil {
		return booking.ErrNotificationRefused.WithDetail("reason", err.Error())
	}
	switch {
	case n.EventType == "TRANSACTION.SUCCESS":
		tx, err := n.Transaction()
		if err != nil {
			return booking.ErrNotificationRefused.WithDetail("reason", err.Error())
		}
		return ps.wechatPaid(ctx, tx)
	case strings.HasPrefix(n.EventType, "REFUND."):
		rr, err := n.RefundResult()
		if err != nil {
			return booking.ErrNotificationRefused.WithDetail("reason", err.Error())
		}
		_, err = ps.SettleRefund(ctx, rr.OutRefundNo, rr.RefundID, RefundOutcome{Succeeded: rr.Status == wechatpay.RefundSuccess,
			Detail: strings.TrimSpace(rr.Status + " " + rr.UserReceivedAccount)})
		return err
	}
	ps.log.Info("wechat pay notification ignored", "event_type", n.EventType, "id", n.ID)
	return nil
}

// wechatPaid books a paid transaction's hold.
func (ps *Payments) wechatPaid(ctx context.Context, tx wechatpay.Transaction) error {
	if tx.TradeState != wechatpay.TradeSuccess || tx.TransactionID == "" {
		return nil
	}
	o, err := ps.ss.OrderByTradeNo(ctx, tx.OutTradeNo)
	if errors.Is(err, booking.ErrNotFound) {
		ps.log.Warn("wechat pay notification for an order this deployment did not make", "out_trade_no", tx.OutTradeNo)
		return nil
	}
	if err != nil {
		return err
	}
	n := PaymentNotice{HoldID: o.HoldID, PaymentID: tx.TransactionID, AmountCents: tx.Amount.Total, PaidAt: tx.SuccessTime,
		Provider: models.ProviderWechatPay}
	if n.PaidAt.IsZero() {
		n.PaidAt = ps.clock.Now()
	}
	if tx.Amount.Total != o.AmountCents {
		// Verified but not what was asked: acknowledged, nothing booked, the money owed back.
		ps.log.Warn("wechat pay amount differs from the order's", "out_trade_no", tx.OutTradeNo, "paid", tx.Amount.Total, "order", o.AmountCents)
		_, err := ps.recordPayment(ctx, n, nil, booking.RefundAmountMismatch)
		return err
	}
	_, err = ps.Pay(ctx, n)
	return err
}

// CloseWechatOrder closes the order of a hold that ended unpaid (a close-order task's work). An order
// the payer paid meanwhile is not closed: its notification books the hold or refunds it.
func (ps *Payments) CloseWechatOrder(ctx context.Context, holdID string) error {
	c := ps.wechatPay
	if c == nil {
		return nil
	}
	o, err := ps.ss.OrderByHold(ctx, holdID)
	if errors.Is(err, booking.ErrNotFound) {
		return nil
	}
	if err != nil || o.ClosedAt != nil {
		return err
	}
	if b, ok, err := ps.ss.BookingByHold(ctx, holdID); err != nil || ok && b.PaymentID != "" {
		return err // paid after all
	}
	err = c.CloseOrder(ctx, o.OutTradeNo)
	if wechatpay.ErrorCode(err) == "ORDERPAID" {
		tx, qerr := c.QueryOrder(ctx, o.OutTradeNo)
		if qerr != nil {
			return qerr
		}
		return ps.wechatPaid(ctx, tx)
	}
	if err != nil {
		return err
	}
	metricOrdersClosed.Inc()
	return ps.ss.OrderClosed(ctx, holdID, ps.clock.Now())
}

// closeOrderOf queues the closing of an ended hold's order, when it has one.
func (ps *Payments) closeOrderOf(ctx context.Context, holdID, orderNo string) {
	s, ok := ps.sched.(PaymentScheduler)
	if orderNo == "" || ps.wechatPay == nil || !ok {
		return
	}
	if err := s.ScheduleCloseOrder(ctx, holdID); err != nil {
		ps.log.Warn("queue close order failed", "hold_id", holdID, "err", err)
	}
}

// wechatRefunds sends refunds of WeChat Pay payments through its refund API.
type wechatRefunds struct{ c *wechatpay.Client }

func (w wechatRefunds) Name() string { return models.ProviderWechatPay }

func (w wechatRefunds) RequestRefund(ctx context.Context, r models.Refund) (string, *RefundOutcome, error) {
	res, err := w.c.Refund(ctx, wechatpay.RefundRequest{TransactionID: r.PaymentID, OutRefundNo: r.OutRefundNo,
		Reason: refundReasonText(r.Reason), RefundCents: r.AmountCents, TotalCents: r.PaidCents})
	if err != nil {
		return "", nil, err
	}
	switch res.Status {
	case wechatpay.RefundSuccess:
		return res.RefundID, &RefundOutcome{Succeeded: true, Detail: res.Status}, nil
	case wechatpay.RefundClosed, wechatpay.RefundAbnormal:
		return res.RefundID, &RefundOutcome{Detail: res.Status}, nil
	}
	return res.RefundID, nil, nil // PROCESSING: the notification settles it
}

// refundReasonText is what the payer sees as the refund's reason.
func refundReasonText(reason string) string {
	switch reason {
	case booking.RefundUserCancel, booking.RefundLateCancel:
		return "预约取消退款"
	case booking.RefundAdminCancel:
		return "场馆取消预约退款"
	case booking.RefundNoShow:
		return "未到场部分退款"
	}
	return "支付未能预约成功，全额退款"
}

// The metrics of this file (engine.go says why they are package-level).
var (
	metricOrdersClosed = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_wechatpay_orders_closed_total", Help: "WeChat Pay orders closed because their hold ended unpaid.",
	})
)
