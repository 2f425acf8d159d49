package wechatpayfake

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Order is an order as the fake stores it. State is NOTPAY, SUCCESS, CLOSED or REFUND.
type Order struct {
	AppID, MchID, OutTradeNo, Description string
	AmountCents                           int64
	PayerOpenID, NotifyURL, TimeExpire    string
	Attach                                string
	PrepayID, TransactionID, State        string
	SuccessTime                           time.Time
	RefundedCents                         int64
}

// params is what must match for a repeated order to get the same prepay_id.
func (o Order) params() Order {
	return Order{AppID: o.AppID, MchID: o.MchID, OutTradeNo: o.OutTradeNo, Description: o.Description, AmountCents: o.AmountCents,
		PayerOpenID: o.PayerOpenID, NotifyURL: o.NotifyURL, TimeExpire: o.TimeExpire, Attach: o.Attach}
}

// Refund is a refund as the fake stores it. Status is PROCESSING until CompleteRefund.
type Refund struct {
	OutRefundNo, RefundID, OutTradeNo, TransactionID string
	Reason, NotifyURL, Status                        string
	RefundCents, TotalCents                          int64
	CreateTime, SuccessTime                          time.Time
}

// Request is one API call the fake answered, with WeChat's error code when it failed.
type Request struct {
	Method, Path string
	Status       int
	Code         string
}

type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type reply struct {
	status int
	body   any // nil: empty body
}

func ok(v any) reply                          { return reply{http.StatusOK, v} }
func fail(status int, code, msg string) reply { return reply{status, apiError{code, msg}} }
func paramError(msg string) reply             { return fail(http.StatusBadRequest, "PARAM_ERROR", msg) }
func signError(msg string) reply              { return fail(http.StatusUnauthorized, "SIGN_ERROR", msg) }
func invalidRequest(msg string) reply         { return fail(http.StatusBadRequest, "INVALID_REQUEST", msg) }
func notFound(code string) reply              { return fail(http.StatusNotFound, code, "订单不存在") }

// Order returns one stored order.
func (f *Fake) Order(outTradeNo string) (Order, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if o := f.orders[outTradeNo]; o != nil {
		return *o, true
	}
	return Order{}, false
}

func (f *Fake) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v3/pay/transactions/jsapi", f.api(f.createJSAPI))
	mux.HandleFunc("POST /v3/pay/transactions/out-trade-no/{no}/close", f.api(f.closeOrder))
	mux.HandleFunc("GET /v3/pay/transactions/out-trade-no/{no}", f.api(f.queryOrder))
	mux.HandleFunc("POST /v3/refund/domestic/refunds", f.api(f.refund))
	mux.HandleFunc("/", f.api(func(*http.Request, []byte) reply { return fail(http.StatusNotFound, "NOT_FOUND", "no such API") }))
	return mux
}

// api authenticates a request, runs h, then signs and records the answer, as WeChat does.
func (f *Fake) api(h func(*http.Request, []byte) reply) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		rep := paramError("unreadable body")
		if err == nil {
			if rep = f.authenticate(r, body); rep.status == 0 {
				rep = h(r, body)
			}
		}
		var data []byte
		if rep.body != nil {
			data = marshal(rep.body)
			w.Header().Set("Content-Type", "application/json")
		}
		f.signedHeaders(w.Header(), f.Serial(), f.now(), data, false)
		w.Header().Set("Request-Id", randText(24))
		w.WriteHeader(rep.status)
		_, _ = w.Write(data)
		code := ""
		if e, isErr := rep.body.(apiError); isErr {
			code = e.Code
		}
		f.mu.Lock()
		f.requests = append(f.requests, Request{Method: r.Method, Path: r.URL.Path, Status: rep.status, Code: code})
		f.mu.Unlock()
	}
}

// authenticate checks the WECHATPAY2-SHA256-RSA2048 Authorization header; a zero reply means OK.
func (f *Fake) authenticate(r *http.Request, body []byte) reply {
	if !strings.Contains(r.Header.Get("Accept"), "application/json") || r.Header.Get("User-Agent") == "" {
		return paramError("Accept: application/json and a User-Agent are required")
	}
	scheme, params, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if scheme != "WECHATPAY2-SHA256-RSA2048" {
		return signError("Authorization scheme must be WECHATPAY2-SHA256-RSA2048")
	}
	kv := map[string]string{}
	for part := range strings.SplitSeq(params, ",") {
		k, v, found := strings.Cut(strings.TrimSpace(part), "=")
		if !found || len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
			return signError("malformed Authorization parameter " + strconv.Quote(part))
		}
		kv[k] = v[1 : len(v)-1]
	}
	for _, k := range []string{"mchid", "nonce_str", "signature", "timestamp", "serial_no"} {
		if kv[k] == "" {
			return signError("Authorization lacks " + k)
		}
	}
	if kv["mchid"] != f.mchID {
		return signError("unknown mchid " + kv["mchid"])
	}
	if kv["serial_no"] != f.merchantSerial {
		return signError("商户证书序列号有误 " + kv["serial_no"])
	}
	ts, err := strconv.ParseInt(kv["timestamp"], 10, 64)
	if d := f.now().Sub(time.Unix(ts, 0)); err != nil || d > 5*time.Minute || d < -5*time.Minute {
		return signError("timestamp expired or malformed")
	}
	sig, err := base64.StdEncoding.DecodeString(kv["signature"])
	msg := r.Method + "\n" + r.RequestURI + "\n" + kv["timestamp"] + "\n" + kv["nonce_str"] + "\n" + string(body) + "\n"
	sum := sha256.Sum256([]byte(msg))
	if err != nil || rsa.VerifyPKCS1v15(f.merchantPub, crypto.SHA256, sum[:], sig) != nil {
		return signError("签名错误")
	}
	return reply{}
}

// decodeStrict rejects unknown fields so a misspelt field name in the client fails loudly.
func decodeStrict(body []byte, v any) reply {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return paramError("body: " + err.Error())
	}
	return reply{}
}

func validNotifyURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && u.RawQuery == ""
}

type jsapiBody struct {
	AppID       string `json:"appid"`
	MchID       string `json:"mchid"`
	Description string `json:"description"`
	OutTradeNo  string `json:"out_trade_no"`
	TimeExpire  string `json:"time_expire"`
	Attach      string `json:"attach"`
	NotifyURL   string `json:"notify_url"`
	Amount      struct {
		Total    int64  `json:"total"`
		Currency string `json:"currency"`
	} `json:"amount"`
	Payer struct {
		OpenID string `json:"openid"`
	} `json:"payer"`
}

func (f *Fake) createJSAPI(_ *http.Request, body []byte) reply {
	var b jsapiBody
	if rep := decodeStrict(body, &b); rep.status != 0 {
		return rep
	}
	switch n := utf8.RuneCountInString(b.Description); {
	case b.AppID != f.appID || b.MchID != f.mchID:
		return fail(http.StatusBadRequest, "APPID_MCHID_NOT_MATCH", "appid和mch_id不匹配")
	case n == 0 || n > 127:
		return paramError("description must be 1-127 characters")
	case !outTradeNoRe.MatchString(b.OutTradeNo):
		return paramError("out_trade_no must be 6-32 of [A-Za-z0-9_*-]")
	case !validNotifyURL(b.NotifyURL):
		return paramError("notify_url must be an absolute URL without query")
	case b.Amount.Total <= 0 || (b.Amount.Currency != "" && b.Amount.Currency != "CNY"):
		return paramError("amount.total must be positive, currency CNY")
	case b.Payer.OpenID == "":
		return paramError("payer.openid is required")
	case len(b.Attach) > 128:
		return paramError("attach is longer than 128 bytes")
	}
	if b.TimeExpire != "" {
		t, err := time.Parse(time.RFC3339, b.TimeExpire)
		if err != nil || !timeExpireRe.MatchString(b.TimeExpire) {
			return paramError("time_expire must look like 2018-06-08T10:34:56+08:00")
		}
		if !t.After(f.now()) {
			return paramError("time_expire is in the past")
		}
	}
	o := Order{AppID: b.AppID, MchID: b.MchID, OutTradeNo: b.OutTradeNo, Description: b.Description, AmountCents: b.Amount.Total,
		PayerOpenID: b.Payer.OpenID, NotifyURL: b.NotifyURL, TimeExpire: b.TimeExpire, Attach: b.Attach, State: "NOTPAY",
		PrepayID: "wx" + f.now().In(cst).Format("20060102150405") + strings.ToLower(randText(20))}
	f.mu.Lock()
	defer f.mu.Unlock()
	if ex := f.orders[o.OutTradeNo]; ex != nil {
		switch {
		case ex.State == "SUCCESS" || ex.State == "REFUND":
			return fail(http.StatusBadRequest, "ORDERPAID", "该订单已支付")
		case ex.State == "CLOSED":
			return fail(http.StatusBadRequest, "ORDER_CLOSED", "订单已关闭")
		case ex.params() != o.params():
			return invalidRequest("201 商户订单号重复")
		}
		return ok(map[string]string{"prepay_id": ex.PrepayID}) // WeChat re-issues the same prepay for an identical repeat
	}
	f.orders[o.OutTradeNo] = &o
	f.orderSeq = append(f.orderSeq, o.OutTradeNo)
	return ok(map[string]string{"prepay_id": o.PrepayID})
}

func (f *Fake) closeOrder(r *http.Request, body []byte) reply {
	var b struct {
		MchID string `json:"mchid"`
	}
	if rep := decodeStrict(body, &b); rep.status != 0 {
		return rep
	}
	if b.MchID != f.mchID {
		return paramError("mchid does not match the caller")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.orders[r.PathValue("no")]
	switch {
	case o == nil:
		return notFound("ORDER_NOT_EXIST")
	case o.State == "SUCCESS" || o.State == "REFUND":
		return fail(http.StatusBadRequest, "ORDERPAID", "订单已支付")
	case o.State == "NOTPAY":
		o.State = "CLOSED"
		f.closed = append(f.closed, o.OutTradeNo)
	}
	return reply{http.StatusNoContent, nil} // closing a closed order again is accepted
}

func (f *Fake) queryOrder(r *http.Request, _ []byte) reply {
	if r.URL.Query().Get("mchid") != f.mchID {
		return paramError("query parameter mchid is missing or wrong")
	}
	o, found := f.Order(r.PathValue("no"))
	if !found {
		return notFound("ORDER_NOT_EXIST")
	}
	return ok(transactionJSON(o))
}

var stateDesc = map[string]string{"NOTPAY": "订单未支付", "SUCCESS": "支付成功", "CLOSED": "已关闭", "REFUND": "转入退款"}

func transactionJSON(o Order) map[string]any {
	amt := map[string]any{"total": o.AmountCents, "currency": "CNY"}
	m := map[string]any{"appid": o.AppID, "mchid": o.MchID, "out_trade_no": o.OutTradeNo, "trade_state": o.State,
		"trade_state_desc": stateDesc[o.State], "attach": o.Attach, "amount": amt, "payer": map[string]any{}}
	if o.TransactionID != "" {
		m["transaction_id"], m["trade_type"], m["bank_type"] = o.TransactionID, "JSAPI", "OTHERS"
		m["success_time"] = o.SuccessTime.In(cst).Format(time.RFC3339)
		m["payer"] = map[string]any{"openid": o.PayerOpenID}
		amt["payer_total"], amt["payer_currency"] = o.AmountCents, "CNY"
	}
	return m
}

type refundBody struct {
	TransactionID string `json:"transaction_id"`
	OutTradeNo    string `json:"out_trade_no"`
	OutRefundNo   string `json:"out_refund_no"`
	Reason        string `json:"reason"`
	NotifyURL     string `json:"notify_url"`
	Amount        struct {
		Refund   int64  `json:"refund"`
		Total    int64  `json:"total"`
		Currency string `json:"currency"`
	} `json:"amount"`
}

func (f *Fake) refund(_ *http.Request, body []byte) reply {
	var b refundBody
	if rep := decodeStrict(body, &b); rep.status != 0 {
		return rep
	}
	switch {
	case !outRefundNoRe.MatchString(b.OutRefundNo):
		return paramError("out_refund_no is malformed")
	case b.OutTradeNo == "" && b.TransactionID == "":
		return paramError("out_trade_no or transaction_id is required")
	case b.NotifyURL != "" && !validNotifyURL(b.NotifyURL):
		return paramError("notify_url must be an absolute URL without query")
	case b.Amount.Refund <= 0 || b.Amount.Currency != "CNY":
		return paramError("amount.refund must be positive, amount.currency CNY")
	}
	refundID := f.nextID("50300", 10)
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.orders[b.OutTradeNo]
	if b.OutTradeNo == "" {
		for _, cand := range f.orders {
			if cand.TransactionID == b.TransactionID {
				o = cand
			}
		}
	}
	if o == nil || (b.TransactionID != "" && o.TransactionID != b.TransactionID) {
		return notFound("RESOURCE_NOT_EXISTS")
	}
	if ex := f.refunds[b.OutRefundNo]; ex != nil {
		if ex.OutTradeNo != o.OutTradeNo || ex.RefundCents != b.Amount.Refund || ex.TotalCents != b.Amount.Total {
			return invalidRequest("同一退款单号的请求参数与之前不一致")
		}
		return ok(refundJSON(*ex)) // idempotent: the same refund, whatever its status now
	}
	switch {
	case o.State != "SUCCESS" && o.State != "REFUND":
		return invalidRequest("订单未支付")
	case b.Amount.Total != o.AmountCents:
		return invalidRequest("订单金额与原订单不一致")
	case o.RefundedCents+b.Amount.Refund > o.AmountCents:
		return invalidRequest("申请退款金额超过订单可退金额")
	}
	rf := &Refund{OutRefundNo: b.OutRefundNo, RefundID: refundID, OutTradeNo: o.OutTradeNo, TransactionID: o.TransactionID,
		Reason: b.Reason, NotifyURL: b.NotifyURL, Status: "PROCESSING", RefundCents: b.Amount.Refund, TotalCents: b.Amount.Total, CreateTime: f.now()}
	o.RefundedCents += rf.RefundCents
	o.State = "REFUND"
	f.refunds[rf.OutRefundNo] = rf
	f.refundSeq = append(f.refundSeq, rf.OutRefundNo)
	return ok(refundJSON(*rf))
}

func refundJSON(rf Refund) map[string]any {
	m := map[string]any{"refund_id": rf.RefundID, "out_refund_no": rf.OutRefundNo, "transaction_id": rf.TransactionID,
		"out_trade_no": rf.OutTradeNo, "channel": "ORIGINAL", "user_received_account": "支付用户零钱",
		"create_time": rf.CreateTime.In(cst).Format(time.RFC3339), "status": rf.Status, "funds_account": "AVAILABLE",
		"amount": map[string]any{"total": rf.TotalCents, "refund": rf.RefundCents, "payer_total": rf.TotalCents,
			"payer_refund": rf.RefundCents, "settlement_total": rf.TotalCents, "settlement_refund": rf.RefundCents,
			"discount_refund": 0, "currency": "CNY"}}
	if !rf.SuccessTime.IsZero() {
		m["success_time"] = rf.SuccessTime.In(cst).Format(time.RFC3339)
	}
	return m
}

func selfSignedCert(key *rsa.PrivateKey, serial *big.Int, now time.Time) ([]byte, error) {
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "Tenpay.com fake platform certificate", Organization: []string{"Tenpay.com"}},
		NotBefore:    now.Add(-time.Hour), NotAfter: now.AddDate(5, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	return x509.CreateCertificate(nil, tmpl, tmpl, &key.PublicKey, key)
}

// PublicKeyPEM is the platform key as a "PUBLIC KEY" PEM, like WeChat Pay's pub_key.pem.
func (f *Fake) PublicKeyPEM() []byte {
	der, err := x509.MarshalPKIXPublicKey(&f.platform.PublicKey)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// TLSCertificatePEM is the certificate the fake's HTTPS server presents, for a client in another
// process to trust (SSL_CERT_FILE).
func (f *Fake) TLSCertificatePEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
}

// CertificatePEM is the self-signed platform certificate; its serial is Serial() in certificate mode.
func (f *Fake) CertificatePEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.certDER})
}

// Orders returns the orders in creation order.
func (f *Fake) Orders() []Order {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Order, 0, len(f.orderSeq))
	for _, no := range f.orderSeq {
		out = append(out, *f.orders[no])
	}
	return out
}

// Closed lists the out_trade_no of orders closed by CloseOrder, in order.
func (f *Fake) Closed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.closed...)
}

// Refunds returns the refunds in creation order (a repeated out_refund_no appears once).
func (f *Fake) Refunds() []Refund {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Refund, 0, len(f.refundSeq))
	for _, no := range f.refundSeq {
		out = append(out, *f.refunds[no])
	}
	return out
}

// Requests returns every API call answered so far, including rejected ones.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// RequestCount is len(Requests()).
func (f *Fake) RequestCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}
