package wechatpay_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/wechatpay"
	"github.com/slotwheel/slotwheel/internal/testenv/wechatpayfake"
)

var (
	strangerOnce sync.Once
	strangerKey  *rsa.PrivateKey
)

// stranger is an RSA key neither side trusts, generated once per test binary (slow under -race).
func stranger() *rsa.PrivateKey {
	strangerOnce.Do(func() {
		var err error
		strangerKey, err = rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
	})
	return strangerKey
}

// receiver is a merchant notify endpoint that authenticates callbacks with the client.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	client *wechatpay.Client
	got    []*wechatpay.Notification
	errs   []error
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n, err := rc.client.ParseNotification(r.Header, body)
	if err != nil {
		rc.errs = append(rc.errs, err)
		wechatpay.RejectNotification(w, http.StatusBadRequest, err.Error())
		return
	}
	rc.got = append(rc.got, n)
	wechatpay.AckNotification(w)
}

func (rc *receiver) notifications() []*wechatpay.Notification {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*wechatpay.Notification(nil), rc.got...)
}

func setup(t *testing.T, opts ...wechatpayfake.Option) (*wechatpayfake.Fake, *wechatpay.Client, *receiver) {
	t.Helper()
	fake := wechatpayfake.New(t, opts...)
	rc := &receiver{}
	rc.srv = httptest.NewServer(rc)
	t.Cleanup(rc.srv.Close)
	c := fake.Client(rc.srv.URL + "/wechatpay/notify")
	rc.mu.Lock()
	rc.client = c
	rc.mu.Unlock()
	return fake, c, rc
}

func order(no string) wechatpay.JSAPIOrder {
	return wechatpay.JSAPIOrder{OutTradeNo: no, Description: "场地预订 Court 3", AmountCents: 8800,
		PayerOpenID: "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o", TimeExpire: time.Date(2099, 1, 2, 3, 4, 5, 0, time.UTC), Attach: "a=1&b=<2>"}
}

func apiError(t *testing.T, err error) *wechatpay.APIError {
	t.Helper()
	ae, ok := errors.AsType[*wechatpay.APIError](err)
	require.True(t, ok, "want *APIError, got %v", err)
	return ae
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	fake := wechatpayfake.New(t)
	cases := []struct {
		name, want string
		edit       func(*wechatpay.Config)
	}{
		{"mchid", "Config.MchID", func(c *wechatpay.Config) { c.MchID = "" }},
		{"serial", "Config.MerchantSerial", func(c *wechatpay.Config) { c.MerchantSerial = "" }},
		{"key", "Config.PrivateKey", func(c *wechatpay.Config) { c.PrivateKey = nil }},
		{"apiv3", "Config.APIv3Key must be 32 bytes, got 31", func(c *wechatpay.Config) { c.APIv3Key = c.APIv3Key[:31] }},
		{"platform", "Config.PlatformKeys", func(c *wechatpay.Config) { c.PlatformKeys = nil }},
		{"nil platform key", "Config.PlatformKeys", func(c *wechatpay.Config) { c.PlatformKeys = map[string]*rsa.PublicKey{"X": nil} }},
		{"appid", "Config.AppID", func(c *wechatpay.Config) { c.AppID = "" }},
		{"relative notify", "Config.NotifyURL", func(c *wechatpay.Config) { c.NotifyURL = "/notify" }},
		{"notify query", "Config.NotifyURL", func(c *wechatpay.Config) { c.NotifyURL = "https://m.example.com/n?x=1" }},
		{"api base", "Config.APIBase", func(c *wechatpay.Config) { c.APIBase = "not a url" }},
	}
	for _, tc := range cases {
		cfg := fake.Config()
		tc.edit(&cfg)
		_, err := wechatpay.New(cfg)
		require.ErrorContains(t, err, tc.want, tc.name)
	}

	// Default APIBase: capture the outgoing request instead of reaching WeChat.
	cfg := fake.Config()
	cfg.APIBase = ""
	var got *http.Request
	cfg.HTTPClient = &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		got = r
		return nil, errors.New("offline")
	})}
	c, err := wechatpay.New(cfg)
	require.NoError(t, err)
	_, err = c.QueryOrder(context.Background(), "order_0001")
	require.ErrorContains(t, err, "offline")
	require.Equal(t, "https://api.mch.weixin.qq.com/v3/pay/transactions/out-trade-no/order_0001?mchid="+wechatpayfake.DefaultMchID, got.URL.String())
	require.Regexp(t, `^WECHATPAY2-SHA256-RSA2048 mchid="1900000109",nonce_str="\w+",signature="[A-Za-z0-9+/=]+",timestamp="\d+",serial_no="`+wechatpayfake.DefaultMerchantSerial+`"$`, got.Header.Get("Authorization"))
	require.Equal(t, "application/json", got.Header.Get("Accept"))
	require.NotEmpty(t, got.Header.Get("User-Agent"))
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestCreateJSAPIOrderSignedRoundTrip(t *testing.T) {
	t.Parallel()
	fake, c, rc := setup(t)
	ctx := context.Background()
	o := order("hold_0001")
	prepay, err := c.CreateJSAPIOrder(ctx, o)
	require.NoError(t, err)
	require.Regexp(t, `^wx\d{14}[0-9a-z]{20}$`, prepay)

	got := fake.Orders()
	require.Len(t, got, 1)
	require.Equal(t, wechatpayfake.Order{AppID: wechatpayfake.DefaultAppID, MchID: wechatpayfake.DefaultMchID, OutTradeNo: "hold_0001",
		Description: o.Description, AmountCents: 8800, PayerOpenID: o.PayerOpenID, NotifyURL: rc.srv.URL + "/wechatpay/notify",
		TimeExpire: "2099-01-02T11:04:05+08:00", Attach: "a=1&b=<2>", PrepayID: prepay, State: "NOTPAY"}, got[0])

	again, err := c.CreateJSAPIOrder(ctx, o)
	require.NoError(t, err)
	require.Equal(t, prepay, again, "an identical repeat gets the same prepay_id")

	o.AmountCents = 9900
	_, err = c.CreateJSAPIOrder(ctx, o)
	require.Equal(t, &wechatpay.APIError{Status: 400, Code: "INVALID_REQUEST", Message: "201 商户订单号重复"}, apiError(t, err))
	require.Len(t, fake.Orders(), 1)
	require.Equal(t, 3, fake.RequestCount())

	_, err = c.CreateJSAPIOrder(ctx, wechatpay.JSAPIOrder{OutTradeNo: "bad/no", Description: "x", AmountCents: 1, PayerOpenID: "o"})
	require.ErrorContains(t, err, "invalid out_trade_no")
	require.Equal(t, 3, fake.RequestCount(), "rejected locally")
}

func TestFakeRejectsBadRequestSignatures(t *testing.T) {
	t.Parallel()
	fake := wechatpayfake.New(t)
	cases := map[string]func(*wechatpay.Config){
		"unknown merchant key": func(c *wechatpay.Config) { c.PrivateKey = stranger() },
		"wrong serial":         func(c *wechatpay.Config) { c.MerchantSerial = "1DDE55AD98ED71D6EDD4A4A16996DE7B47773A8C" },
		"wrong mchid":          func(c *wechatpay.Config) { c.MchID = "1230000109" },
		"skewed clock":         func(c *wechatpay.Config) { c.Now = func() time.Time { return time.Now().Add(-6 * time.Minute) } },
	}
	for name, edit := range cases {
		cfg := fake.Config()
		cfg.NotifyURL = "https://m.example.com/notify"
		edit(&cfg)
		c, err := wechatpay.New(cfg)
		require.NoError(t, err)
		_, err = c.CreateJSAPIOrder(context.Background(), order("sig_0001"))
		ae := apiError(t, err)
		require.Equal(t, 401, ae.Status, name)
		require.Equal(t, "SIGN_ERROR", ae.Code, name)
		require.Equal(t, "SIGN_ERROR", wechatpay.ErrorCode(err))
	}
	require.Empty(t, fake.Orders())
	require.Len(t, fake.Requests(), len(cases))
}

func TestClientVerifiesAnswers(t *testing.T) {
	t.Parallel()
	fake := wechatpayfake.New(t)
	ctx := context.Background()
	newClient := func(edit func(*wechatpay.Config)) *wechatpay.Client {
		cfg := fake.Config()
		cfg.NotifyURL = "https://m.example.com/notify"
		edit(&cfg)
		c, err := wechatpay.New(cfg)
		require.NoError(t, err)
		return c
	}
	c := newClient(func(c *wechatpay.Config) {
		c.PlatformKeys = map[string]*rsa.PublicKey{fake.Serial(): &stranger().PublicKey}
	})
	_, err := c.CreateJSAPIOrder(ctx, order("ans_0001"))
	require.ErrorIs(t, err, wechatpay.ErrBadSignature)

	c = newClient(func(c *wechatpay.Config) {
		c.PlatformKeys = map[string]*rsa.PublicKey{"OTHER": fake.PlatformPublicKey()}
	})
	_, err = c.CreateJSAPIOrder(ctx, order("ans_0002"))
	require.ErrorIs(t, err, wechatpay.ErrUnknownSerial)

	// A man in the middle rewriting a signed answer.
	c = newClient(func(c *wechatpay.Config) {
		inner := c.HTTPClient.Transport
		c.HTTPClient = &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			resp, err := inner.RoundTrip(r)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body = io.NopCloser(strings.NewReader(strings.Replace(string(b), `"wx`, `"wy`, 1)))
			}
			return resp, err
		})}
	})
	_, err = c.CreateJSAPIOrder(ctx, order("ans_0003"))
	require.ErrorIs(t, err, wechatpay.ErrBadSignature)
	require.NotErrorIs(t, err, wechatpay.ErrUnknownSerial)
}

func TestPaymentParamsSignedWithMerchantKey(t *testing.T) {
	t.Parallel()
	_, c, _ := setup(t)
	p := c.PaymentParams("wx201410272009395522657a690389285100")
	raw, err := json.Marshal(p)
	require.NoError(t, err)
	var m map[string]string
	require.NoError(t, json.Unmarshal(raw, &m))
	require.ElementsMatch(t, []string{"appId", "timeStamp", "nonceStr", "package", "signType", "paySign"}, keys(m))
	require.Equal(t, wechatpayfake.DefaultAppID, m["appId"])
	require.Equal(t, "prepay_id=wx201410272009395522657a690389285100", m["package"])
	require.Equal(t, "RSA", m["signType"])
	ts, err := strconv.ParseInt(m["timeStamp"], 10, 64)
	require.NoError(t, err)
	require.InDelta(t, time.Now().Unix(), ts, 5)

	verify := func(pkg string) error {
		sig, err := base64.StdEncoding.DecodeString(m["paySign"])
		require.NoError(t, err)
		sum := sha256.Sum256([]byte(m["appId"] + "\n" + m["timeStamp"] + "\n" + m["nonceStr"] + "\n" + pkg + "\n"))
		return rsa.VerifyPKCS1v15(&wechatpayfake.MerchantKey().PublicKey, crypto.SHA256, sum[:], sig)
	}
	require.NoError(t, verify(m["package"]))
	require.Error(t, verify("prepay_id=wx0"))
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestPayNotifyAndQuery(t *testing.T) {
	t.Parallel()
	fake, c, rc := setup(t)
	ctx := context.Background()
	_, err := c.CreateJSAPIOrder(ctx, order("pay_0001"))
	require.NoError(t, err)
	tx, err := c.QueryOrder(ctx, "pay_0001")
	require.NoError(t, err)
	require.Equal(t, wechatpay.TradeNotPay, tx.TradeState)
	require.Empty(t, tx.TransactionID)
	require.Equal(t, int64(8800), tx.Amount.Total)

	require.Equal(t, http.StatusNoContent, fake.Pay("pay_0001", "openid-payer"))
	got := rc.notifications()
	require.Len(t, got, 1)
	require.Equal(t, "TRANSACTION.SUCCESS", got[0].EventType)
	require.Equal(t, "encrypt-resource", got[0].ResourceType)
	paid, err := got[0].Transaction()
	require.NoError(t, err)
	require.Regexp(t, `^42000\d{23}$`, paid.TransactionID)
	require.WithinDuration(t, time.Now(), paid.SuccessTime, time.Minute)
	require.Equal(t, wechatpay.Transaction{AppID: wechatpayfake.DefaultAppID, MchID: wechatpayfake.DefaultMchID,
		OutTradeNo: "pay_0001", TransactionID: paid.TransactionID, TradeType: "JSAPI", TradeState: wechatpay.TradeSuccess,
		TradeStateDesc: "支付成功", Attach: "a=1&b=<2>", SuccessTime: paid.SuccessTime, Payer: wechatpay.Payer{OpenID: "openid-payer"},
		Amount: wechatpay.Amount{Total: 8800, PayerTotal: 8800, Currency: "CNY"}}, paid)
	_, err = got[0].RefundResult()
	require.ErrorContains(t, err, "not a refund")

	tx, err = c.QueryOrder(ctx, "pay_0001")
	require.NoError(t, err)
	require.True(t, paid.SuccessTime.Equal(tx.SuccessTime))
	tx.SuccessTime = paid.SuccessTime
	require.Equal(t, paid, tx)

	_, err = c.QueryOrder(ctx, "nope_0001")
	require.Equal(t, 404, apiError(t, err).Status)
	require.Equal(t, "ORDER_NOT_EXIST", wechatpay.ErrorCode(err))
}

func TestCloseOrder(t *testing.T) {
	t.Parallel()
	fake, c, _ := setup(t)
	ctx := context.Background()
	_, err := c.CreateJSAPIOrder(ctx, order("close_0001"))
	require.NoError(t, err)
	require.NoError(t, c.CloseOrder(ctx, "close_0001"))
	require.NoError(t, c.CloseOrder(ctx, "close_0001"), "closing twice is harmless")
	require.Equal(t, []string{"close_0001"}, fake.Closed())
	tx, err := c.QueryOrder(ctx, "close_0001")
	require.NoError(t, err)
	require.Equal(t, wechatpay.TradeClosed, tx.TradeState)
	_, err = c.CreateJSAPIOrder(ctx, order("close_0001"))
	require.Equal(t, "ORDER_CLOSED", wechatpay.ErrorCode(err))

	_, err = c.CreateJSAPIOrder(ctx, order("close_0002"))
	require.NoError(t, err)
	fake.Pay("close_0002", "")
	err = c.CloseOrder(ctx, "close_0002")
	require.Equal(t, &wechatpay.APIError{Status: 400, Code: "ORDERPAID", Message: "订单已支付"}, apiError(t, err))
	require.Equal(t, []string{"close_0001"}, fake.Closed())
	require.Equal(t, "ORDER_NOT_EXIST", wechatpay.ErrorCode(c.CloseOrder(ctx, "close_0003")))
}

func TestRefundIdempotentAndNotified(t *testing.T) {
	t.Parallel()
	fake, c, rc := setup(t)
	ctx := context.Background()
	_, err := c.CreateJSAPIOrder(ctx, order("ref_0001"))
	require.NoError(t, err)
	req := wechatpay.RefundRequest{OutTradeNo: "ref_0001", OutRefundNo: "rf_0001", Reason: "取消预订", RefundCents: 3000, TotalCents: 8800}
	_, err = c.Refund(ctx, req)
	require.Equal(t, "INVALID_REQUEST", wechatpay.ErrorCode(err), "unpaid order")
	require.Equal(t, http.StatusNoContent, fake.Pay("ref_0001", ""))

	r1, err := c.Refund(ctx, req)
	require.NoError(t, err)
	require.Regexp(t, `^50300\d{24}$`, r1.RefundID)
	require.Equal(t, wechatpay.RefundResult{RefundID: r1.RefundID, OutRefundNo: "rf_0001", TransactionID: fake.Orders()[0].TransactionID,
		OutTradeNo: "ref_0001", Status: wechatpay.RefundProcessing, UserReceivedAccount: "支付用户零钱",
		Amount: wechatpay.Amount{Total: 8800, PayerTotal: 8800, Refund: 3000, PayerRefund: 3000, Currency: "CNY"}}, r1)
	r2, err := c.Refund(ctx, req)
	require.NoError(t, err)
	require.Equal(t, r1, r2, "same out_refund_no, same refund")
	require.Len(t, fake.Refunds(), 1)

	changed := req
	changed.RefundCents = 3100
	_, err = c.Refund(ctx, changed)
	require.Equal(t, "INVALID_REQUEST", wechatpay.ErrorCode(err))
	over := wechatpay.RefundRequest{OutTradeNo: "ref_0001", OutRefundNo: "rf_0002", RefundCents: 5801, TotalCents: 8800}
	_, err = c.Refund(ctx, over)
	require.Equal(t, "INVALID_REQUEST", wechatpay.ErrorCode(err), "3000+5801 exceeds 8800")
	over.RefundCents = 5800
	_, err = c.Refund(ctx, over)
	require.NoError(t, err)

	require.Equal(t, http.StatusNoContent, fake.CompleteRefund("rf_0001", true))
	require.Equal(t, http.StatusNoContent, fake.CompleteRefund("rf_0002", false))
	got := rc.notifications()
	require.Len(t, got, 3) // payment + two refunds
	require.Equal(t, "REFUND.SUCCESS", got[1].EventType)
	done, err := got[1].RefundResult()
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), done.SuccessTime, time.Minute)
	want := r1
	want.Status, want.SuccessTime, want.Amount.Currency = wechatpay.RefundSuccess, done.SuccessTime, ""
	require.Equal(t, want, done)
	require.Equal(t, "REFUND.ABNORMAL", got[2].EventType)
	bad, err := got[2].RefundResult()
	require.NoError(t, err)
	require.Equal(t, wechatpay.RefundAbnormal, bad.Status)

	require.Equal(t, []string{"SUCCESS", "ABNORMAL"}, []string{fake.Refunds()[0].Status, fake.Refunds()[1].Status})
	tx, err := c.QueryOrder(ctx, "ref_0001")
	require.NoError(t, err)
	require.Equal(t, wechatpay.TradeRefund, tx.TradeState)
}

func TestParseNotificationRejectsTampering(t *testing.T) {
	t.Parallel()
	fake, c, _ := setup(t)
	sentinels := []error{wechatpay.ErrBadSignature, wechatpay.ErrUnknownSerial, wechatpay.ErrStaleTimestamp, wechatpay.ErrDecrypt, wechatpay.ErrMismatch}
	cases := []struct {
		name   string
		mutate func(*wechatpayfake.NotifyOpts)
		want   error
	}{
		{"genuine", func(*wechatpayfake.NotifyOpts) {}, nil},
		{"tampered body", wechatpayfake.TamperedBody, wechatpay.ErrBadSignature},
		{"forged signature", wechatpayfake.ForgedSignature, wechatpay.ErrBadSignature},
		{"wrong serial", wechatpayfake.WrongSerial, wechatpay.ErrUnknownSerial},
		{"stale timestamp", wechatpayfake.StaleTimestamp, wechatpay.ErrStaleTimestamp},
		{"future timestamp", func(o *wechatpayfake.NotifyOpts) { o.Timestamp = o.Timestamp.Add(6 * time.Minute) }, wechatpay.ErrStaleTimestamp},
		{"bad ciphertext", wechatpayfake.CorruptedCiphertext, wechatpay.ErrDecrypt},
		{"wrong apiv3 key", wechatpayfake.WrongAPIv3Key, wechatpay.ErrDecrypt},
		{"wrong mchid", wechatpayfake.WrongMchID, wechatpay.ErrMismatch},
		{"wrong appid", wechatpayfake.WrongAppID, wechatpay.ErrMismatch},
	}
	for _, tc := range cases {
		h, body := fake.PaymentNotification("hold_0042", 12345, tc.mutate)
		n, err := c.ParseNotification(h, body)
		for _, s := range sentinels {
			require.Equal(t, s == tc.want, errors.Is(err, s), "%s: err %v vs %v", tc.name, err, s)
		}
		if tc.want != nil {
			require.Nil(t, n, tc.name)
			continue
		}
		require.NoError(t, err)
		tx, err := n.Transaction()
		require.NoError(t, err)
		require.Equal(t, "hold_0042", tx.OutTradeNo)
		require.Equal(t, int64(12345), tx.Amount.Total)
		require.WithinDuration(t, time.Now(), n.CreateTime, time.Minute)
	}

	// A wrong amount is authentic: the caller must compare it with what it charged.
	h, body := fake.PaymentNotification("hold_0042", 12345, wechatpayfake.WrongAmount(1))
	n, err := c.ParseNotification(h, body)
	require.NoError(t, err)
	tx, err := n.Transaction()
	require.NoError(t, err)
	require.Equal(t, int64(1), tx.Amount.Total)

	h, body = fake.PaymentNotification("hold_0042", 12345)
	h.Del("Wechatpay-Signature")
	_, err = c.ParseNotification(h, body)
	require.ErrorIs(t, err, wechatpay.ErrBadSignature)
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, data, 0o600))
	return p
}

func TestPlatformKeyModes(t *testing.T) {
	t.Parallel()
	for _, certMode := range []bool{false, true} {
		var opts []wechatpayfake.Option
		if certMode {
			opts = append(opts, wechatpayfake.WithCertificateMode())
		}
		fake, _, rc := setup(t, opts...)
		var path string
		if certMode {
			path = writeFile(t, "wechatpay_cert.pem", fake.CertificatePEM())
		} else {
			path = writeFile(t, "pub_key.pem", fake.PublicKeyPEM())
		}
		key, serial, err := wechatpay.LoadPublicKey(path)
		require.NoError(t, err)
		require.True(t, key.Equal(fake.PlatformPublicKey()))
		if certMode {
			require.Regexp(t, regexp.MustCompile(`^[0-9A-F]{30,40}$`), serial)
			require.Equal(t, fake.Serial(), serial)
		} else {
			require.Empty(t, serial)
			require.Regexp(t, `^PUB_KEY_ID_\d{28}$`, fake.Serial())
			serial = fake.Serial()
		}
		cfg := fake.Config()
		cfg.NotifyURL = rc.srv.URL
		cfg.PlatformKeys = map[string]*rsa.PublicKey{serial: key}
		c, err := wechatpay.New(cfg)
		require.NoError(t, err)
		_, err = c.CreateJSAPIOrder(context.Background(), order("mode_0001"))
		require.NoError(t, err)
		h, body := fake.PaymentNotification("mode_0001", 8800)
		require.Equal(t, serial, h.Get("Wechatpay-Serial"))
		_, err = c.ParseNotification(h, body)
		require.NoError(t, err)
	}
}

func TestLoadKeys(t *testing.T) {
	t.Parallel()
	k := wechatpayfake.MerchantKey()
	pkcs8, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	for typ, der := range map[string][]byte{"PRIVATE KEY": pkcs8, "RSA PRIVATE KEY": x509.MarshalPKCS1PrivateKey(k)} {
		got, err := wechatpay.LoadPrivateKey(writeFile(t, "key.pem", pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})))
		require.NoError(t, err, typ)
		require.True(t, got.Equal(k), typ)
	}
	got, serial, err := wechatpay.LoadPublicKey(writeFile(t, "pub.pem", pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&k.PublicKey)})))
	require.NoError(t, err)
	require.True(t, got.Equal(&k.PublicKey))
	require.Empty(t, serial)

	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ecPriv, err := x509.MarshalPKCS8PrivateKey(ec)
	require.NoError(t, err)
	for content, want := range map[string]string{
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecPriv})): "needs RSA",
		"not pem": "no PEM block",
		string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecPriv})): "not a private key",
	} {
		_, err = wechatpay.LoadPrivateKey(writeFile(t, "bad.pem", []byte(content)))
		require.ErrorContains(t, err, want)
	}
	_, err = wechatpay.LoadPrivateKey(filepath.Join(t.TempDir(), "missing.pem"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestValidOutNo(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"abc123": true, "hold_01HZX-9": true, strings.Repeat("a", 32): true,
		"abc12": false, strings.Repeat("a", 33): false, "has space": false, "slash/no": false, "星号订单号码": false, "a*b*c*d": false,
	} {
		require.Equal(t, want, wechatpay.ValidOutNo(s), s)
	}
}
