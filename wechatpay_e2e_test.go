package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/notify/webhook"
	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/internal/testenv/wechatpayfake"
)

// TestWechatPayStory drives WeChat Pay end to end against the binary and a local fake of the WeChat
// Pay API that implements the real scheme: a hold gets its wx.requestPayment parameters from a JSAPI
// order, the fake's signed and encrypted notification books it, an unpaid hold's order is closed
// when the hold expires, and a no-show under a 50% policy is refunded half through the refund API,
// settled by the refund notification and announced as refund.succeeded. Tampered and replayed
// notifications are refused and change nothing.
func TestWechatPayStory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	fake := wechatpayfake.New(t)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, data, 0o600))
		return path
	}
	der, err := x509.MarshalPKCS8PrivateKey(wechatpayfake.MerchantKey())
	require.NoError(t, err)
	addr := freeAddr(t)
	base := "http://" + addr
	env := append(os.Environ(), "SLOTWHEEL_SQLITE_PATH="+filepath.Join(dir, "sw.db"), "SLOTWHEEL_HTTP_ADDR="+addr,
		"SLOTWHEEL_JWT_SECRET="+e2eJWT, "SLOTWHEEL_PAYMENT_SECRET="+e2ePay, "SLOTWHEEL_DEV_LOGIN=true", "SLOTWHEEL_DEMO=false",
		"SLOTWHEEL_HOLD_TTL=3s",
		"SLOTWHEEL_WECHAT_APPID="+wechatpayfake.DefaultAppID, "SLOTWHEEL_WECHAT_SECRET=wx-secret",
		"SLOTWHEEL_WECHATPAY_MCHID="+wechatpayfake.DefaultMchID, "SLOTWHEEL_WECHATPAY_SERIAL="+wechatpayfake.DefaultMerchantSerial,
		"SLOTWHEEL_WECHATPAY_PRIVATE_KEY="+write("apiclient_key.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"SLOTWHEEL_WECHATPAY_APIV3_KEY="+wechatpayfake.DefaultAPIv3Key,
		"SLOTWHEEL_WECHATPAY_PUBLIC_KEY="+write("pub_key.pem", fake.PublicKeyPEM()),
		"SLOTWHEEL_WECHATPAY_PUBLIC_KEY_ID="+fake.Serial(),
		"SLOTWHEEL_WECHATPAY_NOTIFY_URL="+base+"/api/v1/payments/wechatpay/notify",
		"SLOTWHEEL_WECHATPAY_API_BASE="+fake.URL(),
		// The fake serves HTTPS with a certificate of its own; the binary trusts it.
		"SSL_CERT_FILE="+write("fake-ca.pem", fake.TLSCertificatePEM()))
	if testenv.RealServers() {
		db := testenv.NewDB(t)
		r := testenv.NewRedis(t)
		env = append(env, "SLOTWHEEL_MYSQL_DSN="+db.DSN, "SLOTWHEEL_REDIS_URL="+privateDB(t, r.URL), "SLOTWHEEL_REDIS_PREFIX="+r.Prefix)
	}
	cmd := exec.Command(binary(t), "all")
	cmd.Env = env
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	c := &client{t: t, base: base}
	c.waitReady()

	admin := c.token("ops", "admin", "")
	hooks := newEventSink(t)
	hook := c.do("POST", "/api/v1/admin/webhooks", admin, map[string]any{"url": hooks.srv.URL, "event_types": []string{"refund.requested", "refund.succeeded"}}, 201)
	hooks.secret = hook["secret"].(string)
	venue := c.do("POST", "/api/v1/admin/venues", admin, map[string]any{"name": "Pay Courts", "timezone": "Asia/Shanghai"}, 201)
	res := c.do("POST", "/api/v1/admin/resources", admin, map[string]any{"venue_id": venue["venue_id"], "name": "Court",
		"kind": "court", "capacity": 5, "category": "wxpay", "price_cents": 3000}, 201)
	rid := res["resource_id"].(string)
	c.do("PUT", "/api/v1/admin/resources/"+rid+"/schedule", admin, map[string]any{"slot_minutes": 1,
		"weekly": []map[string]any{{"weekdays": []int{1, 2, 3, 4, 5, 6, 7}, "open": "00:00", "close": "24:00"}}, "horizon_days": 2}, 200)
	c.do("PUT", "/api/v1/admin/policies/grace", admin, map[string]any{"category": "wxpay", "grace_seconds": 2}, 200)
	c.do("PUT", "/api/v1/admin/resources/"+rid+"/policy", admin, map[string]any{"noshow_refund_percent": 50}, 200)

	alice := c.token("wx:o-alice", "user", "")
	bob := c.token("wx:o-bob", "user", "")
	plain := c.token("carol", "user", "")
	holdNow := func(tok string) map[string]any {
		start := time.Now().Truncate(time.Minute)
		if time.Until(start.Add(time.Minute)) < 20*time.Second {
			start = start.Add(time.Minute)
		}
		return c.do("POST", "/api/v1/holds", tok, map[string]any{"resource_id": rid,
			"start": start.Format(time.RFC3339), "end": start.Add(time.Minute).Format(time.RFC3339)}, 201)
	}

	// 1. The wx.requestPayment parameters of a JSAPI order, paySign made with the merchant key.
	h := holdNow(alice)
	hid := h["hold_id"].(string)
	params := c.do("POST", "/api/v1/holds/"+hid+"/wechatpay", alice, nil, 200)
	require.Equal(t, wechatpayfake.DefaultAppID, params["appId"])
	require.Equal(t, "RSA", params["signType"])
	pkg := params["package"].(string)
	require.True(t, strings.HasPrefix(pkg, "prepay_id="))
	msg := params["appId"].(string) + "\n" + params["timeStamp"].(string) + "\n" + params["nonceStr"].(string) + "\n" + pkg + "\n"
	sig, err := base64.StdEncoding.DecodeString(params["paySign"].(string))
	require.NoError(t, err)
	sum := sha256.Sum256([]byte(msg))
	require.NoError(t, rsa.VerifyPKCS1v15(&wechatpayfake.MerchantKey().PublicKey, crypto.SHA256, sum[:], sig), "paySign verifies")
	again := c.do("POST", "/api/v1/holds/"+hid+"/wechatpay", alice, nil, 200)
	require.Equal(t, pkg, again["package"], "a repeated request reuses the order")
	require.Len(t, fake.Orders(), 1)
	order := fake.Orders()[0]
	require.Equal(t, "o-alice", order.PayerOpenID, "the payer is the user's openid")
	require.EqualValues(t, h["amount_cents"], order.AmountCents)
	c.do("POST", "/api/v1/holds/"+holdNow(plain)["hold_id"].(string)+"/wechatpay", plain, nil, 403)

	// 2. Tampered notifications are refused and change nothing.
	notifyURL := base + "/api/v1/payments/wechatpay/notify"
	for name, mut := range map[string]func(*wechatpayfake.NotifyOpts){
		"tampered body": wechatpayfake.TamperedBody, "forged signature": wechatpayfake.ForgedSignature,
		"wrong serial": wechatpayfake.WrongSerial, "stale timestamp": wechatpayfake.StaleTimestamp,
		"corrupted ciphertext": wechatpayfake.CorruptedCiphertext, "wrong api v3 key": wechatpayfake.WrongAPIv3Key,
		"another merchant": wechatpayfake.WrongMchID,
	} {
		hdr, body := fake.PaymentNotification(order.OutTradeNo, order.AmountCents, mut)
		status, answer := fake.Send(notifyURL, hdr, body)
		require.Equal(t, http.StatusUnauthorized, status, "%s: %s", name, answer)
		require.Contains(t, string(answer), `"code":"FAIL"`, name)
	}
	require.Equal(t, "HELD", c.do("GET", "/api/v1/holds/"+hid, alice, nil, 200)["status"], "nothing was booked")

	// 3. The payer pays: WeChat's notification books the hold. WeChat resends a notification until it
	// hears success — signed anew, or byte for byte when its first delivery's answer was lost — and
	// each copy is acknowledged and changes nothing.
	require.Equal(t, http.StatusNoContent, fake.Pay(order.OutTradeNo, ""))
	hdr, body := fake.PaymentNotification(order.OutTradeNo, order.AmountCents)
	status, answer := fake.Send(notifyURL, hdr, body)
	require.Equal(t, http.StatusNoContent, status, string(answer))
	status, answer = fake.Send(notifyURL, hdr, body)
	require.Equal(t, http.StatusNoContent, status, "the very same notification again is acknowledged: %s", answer)
	hdr2, body2 := fake.PaymentNotification(order.OutTradeNo, order.AmountCents)
	status, answer = fake.Send(notifyURL, hdr2, body2)
	require.Equal(t, http.StatusNoContent, status, "a resend signed anew is acknowledged: %s", answer)
	bookings := c.do("GET", "/api/v1/bookings", alice, nil, 200)["items"].([]any)
	require.Len(t, bookings, 1)
	bk := bookings[0].(map[string]any)
	require.Equal(t, "CONFIRMED", bk["status"])
	require.Equal(t, hid, bk["hold_id"])
	require.NotEmpty(t, bk["payment_id"], "the transaction id")

	// 4. An unpaid hold's order is closed within 10 s of the hold's expiry.
	hb := holdNow(bob)
	c.do("POST", "/api/v1/holds/"+hb["hold_id"].(string)+"/wechatpay", bob, nil, 200)
	expires, err := time.Parse(time.RFC3339, hb["expires_at"].(string))
	require.NoError(t, err)
	bobOrder := fake.Orders()[len(fake.Orders())-1].OutTradeNo
	waitUntil(t, time.Until(expires)+10*time.Second, "the unpaid hold's order to be closed", func() bool {
		return contains(fake.Closed(), bobOrder)
	})
	require.False(t, contains(fake.Closed(), order.OutTradeNo), "the paid order stays open")

	// 5. Alice never turns up: released at start + 2 s, refunded half through the refund API.
	waitUntil(t, 90*time.Second, "the no-show's refund request to reach WeChat Pay", func() bool { return len(fake.Refunds()) == 1 })
	rf := fake.Refunds()[0]
	require.Equal(t, order.AmountCents/2, rf.RefundCents, "half of the payment")
	require.Equal(t, "RELEASED", c.do("GET", "/api/v1/bookings/"+bk["booking_id"].(string), alice, nil, 200)["status"])
	requested := c.do("GET", "/api/v1/admin/refunds?status=requested", admin, nil, 200)["items"].([]any)
	require.Len(t, requested, 1)
	require.Equal(t, "no_show", requested[0].(map[string]any)["reason"])
	require.Equal(t, http.StatusNoContent, fake.CompleteRefund(rf.OutRefundNo, true))
	rh, rbody := fake.RefundNotification(rf.OutRefundNo)
	for range 2 { // the same REFUND.SUCCESS, resent, and resent byte for byte
		status, answer := fake.Send(notifyURL, rh, rbody)
		require.Equal(t, http.StatusNoContent, status, "a refund notification again is acknowledged: %s", answer)
	}
	done := c.do("GET", "/api/v1/admin/refunds?status=succeeded", admin, nil, 200)["items"].([]any)
	require.Len(t, done, 1)
	require.NotEmpty(t, done[0].(map[string]any)["provider_refund_id"])
	waitUntil(t, 30*time.Second, "refund.succeeded to be delivered", func() bool {
		return contains(hooks.types(), "refund.succeeded")
	})
	require.Equal(t, []string{"refund.requested", "refund.succeeded"}, hooks.types(), "in order, each once")
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// waitUntil polls cond every 100 ms until it holds, failing the test after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
}

// eventSink is a webhook receiver that verifies each request and keeps the event types it got.
type eventSink struct {
	srv    *httptest.Server
	secret string
	mu     sync.Mutex
	got    []string
}

func newEventSink(t *testing.T) *eventSink {
	s := &eventSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := webhook.Verify(s.secret, r.Header, body, time.Now(), webhook.DefaultTolerance); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev struct{ Type string }
		_ = json.Unmarshal(body, &ev)
		s.got = append(s.got, ev.Type)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *eventSink) types() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}
