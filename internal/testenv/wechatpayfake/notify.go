package wechatpayfake

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"io"
	"net/http"
	"time"
)

// NotifyOpts describes a notification before it is encrypted and signed. Builders pre-fill it
// from the fake's state; mutators passed to them may change anything to simulate an attack or a
// misconfiguration.
type NotifyOpts struct {
	Serial       string    // Wechatpay-Serial claimed
	Timestamp    time.Time // Wechatpay-Timestamp and create_time
	EventType    string    // TRANSACTION.SUCCESS, REFUND.SUCCESS, ...
	Summary      string
	OriginalType string         // "transaction" or "refund"; also the GCM associated data
	Resource     map[string]any // plaintext object; "amount" is a map[string]any
	APIv3Key     []byte         // encryption key

	ForgeSignature    bool // sign a different message (like WeChat's WECHATPAY/SIGNTEST/ probes)
	TamperBody        bool // alter the body after signing
	CorruptCiphertext bool // flip a bit of the ciphertext before signing: signature valid, decryption fails
}

// Ready-made mutators.
var (
	WrongSerial         = func(o *NotifyOpts) { o.Serial = "PUB_KEY_ID_0000000000000000000000000000" }
	StaleTimestamp      = func(o *NotifyOpts) { o.Timestamp = o.Timestamp.Add(-6 * time.Minute) }
	ForgedSignature     = func(o *NotifyOpts) { o.ForgeSignature = true }
	TamperedBody        = func(o *NotifyOpts) { o.TamperBody = true }
	CorruptedCiphertext = func(o *NotifyOpts) { o.CorruptCiphertext = true }
	WrongAPIv3Key       = func(o *NotifyOpts) { o.APIv3Key = []byte("another-apiv3-key-0123456789abcd") }
	WrongMchID          = func(o *NotifyOpts) { o.Resource["mchid"] = "1230000000" }
	WrongAppID          = func(o *NotifyOpts) { o.Resource["appid"] = "wx0000000000000000" }
)

// WrongAmount reports cents as both amount.total and amount.payer_total.
func WrongAmount(cents int64) func(*NotifyOpts) {
	return func(o *NotifyOpts) {
		if amt, isMap := o.Resource["amount"].(map[string]any); isMap {
			amt["total"], amt["payer_total"] = cents, cents
		}
	}
}

// BuildNotification encrypts and signs o the way WeChat does.
func (f *Fake) BuildNotification(o NotifyOpts) (http.Header, []byte) {
	block, err := aes.NewCipher(o.APIv3Key)
	if err != nil {
		f.t.Errorf("wechatpayfake: notification key: %v", err)
		return nil, nil
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		f.t.Errorf("wechatpayfake: %v", err)
		return nil, nil
	}
	nonce := randText(gcm.NonceSize())
	ct := gcm.Seal(nil, []byte(nonce), marshal(o.Resource), []byte(o.OriginalType))
	if o.CorruptCiphertext {
		ct[len(ct)-1] ^= 1
	}
	env := map[string]any{
		"id": f.nextID("EV-", 6), "create_time": o.Timestamp.In(cst).Format(time.RFC3339),
		"resource_type": "encrypt-resource", "event_type": o.EventType, "summary": o.Summary,
		"resource": map[string]any{"original_type": o.OriginalType, "algorithm": "AEAD_AES_256_GCM",
			"ciphertext": base64.StdEncoding.EncodeToString(ct), "associated_data": o.OriginalType, "nonce": nonce},
	}
	body := marshal(env)
	h := http.Header{"Content-Type": {"application/json"}}
	f.signedHeaders(h, o.Serial, o.Timestamp, body, o.ForgeSignature)
	if o.TamperBody {
		env["summary"] = o.Summary + " "
		body = marshal(env)
	}
	return h, body
}

// PaymentNotification builds a TRANSACTION.SUCCESS notification for outTradeNo reporting
// amountCents, without sending it. A known order supplies the other fields (an unpaid one looks
// paid); an unknown one gets plausible defaults, so a receiver can be tested without an order.
func (f *Fake) PaymentNotification(outTradeNo string, amountCents int64, mutate ...func(*NotifyOpts)) (http.Header, []byte) {
	o, found := f.Order(outTradeNo)
	if !found {
		o = Order{AppID: f.appID, MchID: f.mchID, OutTradeNo: outTradeNo, PayerOpenID: "fake-openid"}
	}
	if o.TransactionID == "" {
		o.TransactionID, o.SuccessTime = f.nextID("42000", 9), f.now()
	}
	o.State, o.AmountCents = "SUCCESS", amountCents
	opts := NotifyOpts{Serial: f.Serial(), Timestamp: f.now(), EventType: "TRANSACTION.SUCCESS", Summary: "支付成功",
		OriginalType: "transaction", Resource: transactionJSON(o), APIv3Key: f.apiV3Key}
	for _, m := range mutate {
		m(&opts)
	}
	return f.BuildNotification(opts)
}

var refundEvents = map[string][2]string{
	"SUCCESS": {"REFUND.SUCCESS", "退款成功"}, "ABNORMAL": {"REFUND.ABNORMAL", "退款异常"}, "CLOSED": {"REFUND.CLOSED", "退款关闭"},
}

// RefundNotification builds the REFUND.* notification matching the refund's current status.
func (f *Fake) RefundNotification(outRefundNo string, mutate ...func(*NotifyOpts)) (http.Header, []byte) {
	f.mu.Lock()
	rf := f.refunds[outRefundNo]
	var r Refund
	if rf != nil {
		r = *rf
	}
	f.mu.Unlock()
	ev, known := refundEvents[r.Status]
	if !known {
		f.t.Errorf("wechatpayfake: refund %q is unknown or still %s; call CompleteRefund", outRefundNo, r.Status)
		return nil, nil
	}
	res := map[string]any{"mchid": f.mchID, "out_trade_no": r.OutTradeNo, "transaction_id": r.TransactionID,
		"out_refund_no": r.OutRefundNo, "refund_id": r.RefundID, "refund_status": r.Status, "user_received_account": "支付用户零钱",
		"amount": map[string]any{"total": r.TotalCents, "refund": r.RefundCents, "payer_total": r.TotalCents, "payer_refund": r.RefundCents}}
	if !r.SuccessTime.IsZero() {
		res["success_time"] = r.SuccessTime.In(cst).Format(time.RFC3339)
	}
	opts := NotifyOpts{Serial: f.Serial(), Timestamp: f.now(), EventType: ev[0], Summary: ev[1],
		OriginalType: "refund", Resource: res, APIv3Key: f.apiV3Key}
	for _, m := range mutate {
		m(&opts)
	}
	return f.BuildNotification(opts)
}

// Pay marks an unpaid order paid by openid (empty: the order's payer), posts TRANSACTION.SUCCESS
// to its notify_url and returns the receiver's HTTP status (0 if it could not be delivered).
func (f *Fake) Pay(outTradeNo, openid string) int {
	txID := f.nextID("42000", 9)
	f.mu.Lock()
	o := f.orders[outTradeNo]
	if o == nil || o.State != "NOTPAY" {
		f.mu.Unlock()
		f.t.Errorf("wechatpayfake: Pay(%q): no unpaid order", outTradeNo)
		return 0
	}
	o.State, o.TransactionID, o.SuccessTime = "SUCCESS", txID, f.now()
	if openid != "" {
		o.PayerOpenID = openid
	}
	snap := *o
	f.mu.Unlock()
	h, body := f.PaymentNotification(outTradeNo, snap.AmountCents)
	status, _ := f.Send(snap.NotifyURL, h, body)
	return status
}

// CompleteRefund settles a PROCESSING refund as SUCCESS (or ABNORMAL), posts the REFUND.*
// notification to the refund's notify_url (else the order's) and returns the receiver's status.
func (f *Fake) CompleteRefund(outRefundNo string, success bool) int {
	f.mu.Lock()
	rf := f.refunds[outRefundNo]
	if rf == nil || rf.Status != "PROCESSING" {
		f.mu.Unlock()
		f.t.Errorf("wechatpayfake: CompleteRefund(%q): no processing refund", outRefundNo)
		return 0
	}
	rf.Status = "ABNORMAL"
	if success {
		rf.Status, rf.SuccessTime = "SUCCESS", f.now()
	}
	target := rf.NotifyURL
	if o := f.orders[rf.OutTradeNo]; target == "" && o != nil {
		target = o.NotifyURL
	}
	f.mu.Unlock()
	h, body := f.RefundNotification(outRefundNo)
	status, _ := f.Send(target, h, body)
	return status
}

// Send POSTs a notification to url as WeChat would and returns the receiver's status and body.
func (f *Fake) Send(url string, h http.Header, body []byte) (int, []byte) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		f.t.Errorf("wechatpayfake: notify %s: %v", url, err)
		return 0, nil
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "Mozilla/4.0")
	resp, err := f.notifyClient.Do(req)
	if err != nil {
		f.t.Errorf("wechatpayfake: notify %s: %v", url, err)
		return 0, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, data
}
