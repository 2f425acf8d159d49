package wechatpay

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"
)

// Trade states (Transaction.TradeState) and refund statuses (RefundResult.Status).
const (
	TradeSuccess    = "SUCCESS"
	TradeRefund     = "REFUND" // paid, then (partly) refunded
	TradeNotPay     = "NOTPAY"
	TradeClosed     = "CLOSED"
	TradeRevoked    = "REVOKED"
	TradeUserPaying = "USERPAYING"
	TradePayError   = "PAYERROR"

	RefundSuccess    = "SUCCESS"
	RefundClosed     = "CLOSED"
	RefundProcessing = "PROCESSING"
	RefundAbnormal   = "ABNORMAL" // money could not reach the payer; needs manual handling
)

// chinaTime is UTC+8 without tzdata: WeChat documents time_expire as "2018-06-08T10:34:56+08:00".
var chinaTime = time.FixedZone("CST", 8*60*60)

// JSAPIOrder is a JSAPI (Mini Program / Official Account) prepay order.
type JSAPIOrder struct {
	OutTradeNo  string
	Description string // shown to the payer, at most 127 characters
	AmountCents int64  // in fen (CNY cents)
	PayerOpenID string // payer's openid under Config.AppID
	TimeExpire  time.Time
	Attach      string // echoed back in query answers and notifications, at most 128 bytes
}

// CreateJSAPIOrder places a prepay order and returns its prepay_id. WeChat answers a repeat with
// identical parameters with the same prepay_id, so retrying after a timeout is safe — provided the
// retry sends the same JSAPIOrder (TimeExpire included: recomputing it from "now" makes the repeat a
// conflicting order, INVALID_REQUEST "201 商户订单号重复").
func (c *Client) CreateJSAPIOrder(ctx context.Context, o JSAPIOrder) (string, error) {
	switch {
	case !ValidOutNo(o.OutTradeNo):
		return "", fmt.Errorf("wechatpay: invalid out_trade_no %q", o.OutTradeNo)
	case o.AmountCents <= 0:
		return "", fmt.Errorf("wechatpay: order %s: amount must be positive, got %d", o.OutTradeNo, o.AmountCents)
	case o.PayerOpenID == "":
		return "", fmt.Errorf("wechatpay: order %s: payer openid is required", o.OutTradeNo)
	case o.Description == "" || utf8.RuneCountInString(o.Description) > 127:
		return "", fmt.Errorf("wechatpay: order %s: description must be 1-127 characters", o.OutTradeNo)
	}
	req := map[string]any{
		"appid": c.cfg.AppID, "mchid": c.cfg.MchID, "description": o.Description, "out_trade_no": o.OutTradeNo,
		"notify_url": c.cfg.NotifyURL, "amount": map[string]any{"total": o.AmountCents, "currency": "CNY"},
		"payer": map[string]string{"openid": o.PayerOpenID},
	}
	if o.Attach != "" {
		req["attach"] = o.Attach
	}
	if !o.TimeExpire.IsZero() {
		req["time_expire"] = o.TimeExpire.In(chinaTime).Format(time.RFC3339)
	}
	var out struct {
		PrepayID string `json:"prepay_id"`
	}
	if err := c.do(ctx, http.MethodPost, "/v3/pay/transactions/jsapi", req, &out); err != nil {
		return "", err
	}
	if out.PrepayID == "" {
		return "", fmt.Errorf("wechatpay: order %s: answer has no prepay_id", o.OutTradeNo)
	}
	return out.PrepayID, nil
}

// RequestPayment holds the arguments of wx.requestPayment, ready to be sent to the front end as JSON.
type RequestPayment struct {
	AppID     string `json:"appId"`
	TimeStamp string `json:"timeStamp"`
	NonceStr  string `json:"nonceStr"`
	Package   string `json:"package"`
	SignType  string `json:"signType"`
	PaySign   string `json:"paySign"`
}

// PaymentParams signs the wx.requestPayment arguments for prepayID with the merchant key.
func (c *Client) PaymentParams(prepayID string) RequestPayment {
	p := RequestPayment{
		AppID: c.cfg.AppID, TimeStamp: strconv.FormatInt(c.now().Unix(), 10), NonceStr: rand.Text(),
		Package: "prepay_id=" + prepayID, SignType: "RSA",
	}
	sig, err := c.sign(p.AppID + "\n" + p.TimeStamp + "\n" + p.NonceStr + "\n" + p.Package + "\n")
	if err != nil {
		// New already signed with this key successfully; failing now means the runtime is broken.
		panic(fmt.Sprintf("wechatpay: signing paySign: %v", err))
	}
	p.PaySign = sig
	return p
}

// CloseOrder closes an unpaid order so it can no longer be paid. If the payer already paid,
// WeChat answers an *APIError with Code "ORDERPAID": the caller must treat the order as paid.
func (c *Client) CloseOrder(ctx context.Context, outTradeNo string) error {
	if !ValidOutNo(outTradeNo) {
		return fmt.Errorf("wechatpay: invalid out_trade_no %q", outTradeNo)
	}
	body := map[string]string{"mchid": c.cfg.MchID}
	return c.do(ctx, http.MethodPost, "/v3/pay/transactions/out-trade-no/"+outTradeNo+"/close", body, nil)
}

// Transaction is a payment as WeChat reports it (query answer or TRANSACTION.* notification).
type Transaction struct {
	AppID          string    `json:"appid"`
	MchID          string    `json:"mchid"`
	OutTradeNo     string    `json:"out_trade_no"`
	TransactionID  string    `json:"transaction_id"` // WeChat's id, empty until paid
	TradeType      string    `json:"trade_type"`
	TradeState     string    `json:"trade_state"` // Trade* constants
	TradeStateDesc string    `json:"trade_state_desc"`
	Attach         string    `json:"attach"`
	SuccessTime    time.Time `json:"success_time"` // zero until paid
	Payer          Payer     `json:"payer"`
	Amount         Amount    `json:"amount"`
}

// Payer identifies who paid.
type Payer struct {
	OpenID string `json:"openid"`
}

// Amount is WeChat's amount object, in fen. Payer* differ from the order amounts when
// WeChat-side coupons paid part; Refund fields are set on refunds only.
type Amount struct {
	Total       int64  `json:"total"`
	PayerTotal  int64  `json:"payer_total"`
	Refund      int64  `json:"refund,omitempty"`
	PayerRefund int64  `json:"payer_refund,omitempty"`
	Currency    string `json:"currency,omitempty"`
}

// QueryOrder fetches the current state of an order by out_trade_no.
func (c *Client) QueryOrder(ctx context.Context, outTradeNo string) (Transaction, error) {
	if !ValidOutNo(outTradeNo) {
		return Transaction{}, fmt.Errorf("wechatpay: invalid out_trade_no %q", outTradeNo)
	}
	var t Transaction
	path := "/v3/pay/transactions/out-trade-no/" + outTradeNo + "?mchid=" + url.QueryEscape(c.cfg.MchID)
	err := c.do(ctx, http.MethodGet, path, nil, &t)
	return t, err
}

// RefundRequest asks for (part of) a payment back. Give OutTradeNo or TransactionID.
type RefundRequest struct {
	OutTradeNo    string
	TransactionID string
	OutRefundNo   string // idempotency key: repeating it returns the same refund
	Reason        string // shown to the payer
	RefundCents   int64
	TotalCents    int64 // the original order amount, which WeChat checks
}

// RefundResult is a refund as WeChat reports it (refund answer or REFUND.* notification).
type RefundResult struct {
	RefundID            string    `json:"refund_id"`
	OutRefundNo         string    `json:"out_refund_no"`
	TransactionID       string    `json:"transaction_id"`
	OutTradeNo          string    `json:"out_trade_no"`
	Status              string    `json:"status"` // Refund* constants
	UserReceivedAccount string    `json:"user_received_account"`
	SuccessTime         time.Time `json:"success_time"`
	Amount              Amount    `json:"amount"`
}

// Refund requests a refund. The answer is usually PROCESSING; the outcome arrives as a REFUND.*
// notification (or via QueryRefund). Retrying with the same OutRefundNo is safe.
func (c *Client) Refund(ctx context.Context, r RefundRequest) (RefundResult, error) {
	switch {
	case !ValidOutNo(r.OutRefundNo):
		return RefundResult{}, fmt.Errorf("wechatpay: invalid out_refund_no %q", r.OutRefundNo)
	case r.OutTradeNo == "" && r.TransactionID == "":
		return RefundResult{}, errors.New("wechatpay: refund needs OutTradeNo or TransactionID")
	case r.RefundCents <= 0 || r.TotalCents <= 0 || r.RefundCents > r.TotalCents:
		return RefundResult{}, fmt.Errorf("wechatpay: refund %s: need 0 < refund (%d) <= total (%d)", r.OutRefundNo, r.RefundCents, r.TotalCents)
	}
	b := map[string]any{"out_refund_no": r.OutRefundNo, "notify_url": c.cfg.NotifyURL,
		"amount": map[string]any{"refund": r.RefundCents, "total": r.TotalCents, "currency": "CNY"}}
	for k, v := range map[string]string{"out_trade_no": r.OutTradeNo, "transaction_id": r.TransactionID, "reason": r.Reason} {
		if v != "" {
			b[k] = v
		}
	}
	var res RefundResult
	err := c.do(ctx, http.MethodPost, "/v3/refund/domestic/refunds", b, &res)
	return res, err
}
