package wechatpayfake

import (
	"bytes"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// call sends a request signed by hand (independently of package wechatpay); edit may change the
// signing inputs or the request after signing.
type signing struct {
	key            *rsa.PrivateKey
	mchID, serial  string
	ts             time.Time
	signedBody     []byte // nil: the body sent
	signedPath     string // "": the path sent
	scheme, accept string
}

func call(t *testing.T, f *Fake, method, path string, body []byte, edit func(*signing)) (int, apiError, http.Header, []byte) {
	t.Helper()
	s := signing{key: MerchantKey(), mchID: f.mchID, serial: f.merchantSerial, ts: time.Now(),
		scheme: "WECHATPAY2-SHA256-RSA2048", accept: "application/json"}
	if edit != nil {
		edit(&s)
	}
	if s.signedBody == nil {
		s.signedBody = body
	}
	if s.signedPath == "" {
		s.signedPath = path
	}
	nonce, stamp := randText(32), strconv.FormatInt(s.ts.Unix(), 10)
	sum := sha256.Sum256([]byte(method + "\n" + s.signedPath + "\n" + stamp + "\n" + nonce + "\n" + string(s.signedBody) + "\n"))
	sig, err := rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, sum[:])
	require.NoError(t, err)
	req, err := http.NewRequest(method, f.URL()+path, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", fmt.Sprintf(`%s mchid="%s",nonce_str="%s",signature="%s",timestamp="%s",serial_no="%s"`,
		s.scheme, s.mchID, nonce, base64.StdEncoding.EncodeToString(sig), stamp, s.serial))
	req.Header.Set("Accept", s.accept)
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var e apiError
	if resp.StatusCode >= 300 {
		require.NoError(t, json.Unmarshal(data, &e), string(data))
	}
	return resp.StatusCode, e, resp.Header, data
}

func jsapi(edit func(map[string]any)) []byte {
	b := map[string]any{"appid": DefaultAppID, "mchid": DefaultMchID, "description": "Court 1", "out_trade_no": "fake_0001",
		"notify_url": "https://m.example.com/notify", "time_expire": time.Now().Add(time.Hour).In(cst).Format(time.RFC3339),
		"amount": map[string]any{"total": 100, "currency": "CNY"}, "payer": map[string]any{"openid": "o-1"}}
	if edit != nil {
		edit(b)
	}
	return marshal(b)
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	f := New(t)
	const path = "/v3/pay/transactions/jsapi"
	status, _, _, _ := call(t, f, http.MethodPost, path, jsapi(nil), nil)
	require.Equal(t, http.StatusOK, status)

	other, err := rsa.GenerateKey(rand.Reader, 1024) // only needs to differ; size is irrelevant to a rejection
	require.NoError(t, err)
	cases := map[string]func(*signing){
		"wrong key":    func(s *signing) { s.key = other },
		"wrong mchid":  func(s *signing) { s.mchID = "1230000109" },
		"wrong serial": func(s *signing) { s.serial = "ABCDEF" },
		"stale":        func(s *signing) { s.ts = s.ts.Add(-6 * time.Minute) },
		"future":       func(s *signing) { s.ts = s.ts.Add(6 * time.Minute) },
		"body swapped": func(s *signing) {
			s.signedBody = jsapi(func(m map[string]any) { m["amount"] = map[string]any{"total": 1} })
		},
		"wrong scheme": func(s *signing) { s.scheme = "WECHATPAY2-SHA256-RSA4096" },
		"other url":    func(s *signing) { s.signedPath = "/v3/refund/domestic/refunds" },
	}
	for name, edit := range cases {
		status, e, _, _ := call(t, f, http.MethodPost, path, jsapi(func(m map[string]any) { m["out_trade_no"] = "fake_0002" }), edit)
		require.Equal(t, http.StatusUnauthorized, status, name)
		require.Equal(t, "SIGN_ERROR", e.Code, name)
	}
	status, e, _, _ := call(t, f, http.MethodPost, path, jsapi(nil), func(s *signing) { s.accept = "text/html" })
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "PARAM_ERROR", e.Code)

	require.Len(t, f.Orders(), 1, "only the genuine request created an order")
	reqs := f.Requests()
	require.Len(t, reqs, len(cases)+2)
	require.Equal(t, Request{Method: "POST", Path: path, Status: 200}, reqs[0])
	require.Equal(t, Request{Method: "POST", Path: path, Status: 401, Code: "SIGN_ERROR"}, reqs[1])
}

func TestJSAPIValidation(t *testing.T) {
	t.Parallel()
	f := New(t)
	cases := []struct {
		name, code string
		edit       func(map[string]any)
	}{
		{"appid", "APPID_MCHID_NOT_MATCH", func(m map[string]any) { m["appid"] = "wx0000000000000000" }},
		{"short out_trade_no", "PARAM_ERROR", func(m map[string]any) { m["out_trade_no"] = "abc" }},
		{"zero amount", "PARAM_ERROR", func(m map[string]any) { m["amount"] = map[string]any{"total": 0, "currency": "CNY"} }},
		{"usd", "PARAM_ERROR", func(m map[string]any) { m["amount"] = map[string]any{"total": 1, "currency": "USD"} }},
		{"no openid", "PARAM_ERROR", func(m map[string]any) { m["payer"] = map[string]any{"openid": ""} }},
		{"notify query", "PARAM_ERROR", func(m map[string]any) { m["notify_url"] = "https://m.example.com/n?x=1" }},
		{"no notify", "PARAM_ERROR", func(m map[string]any) { delete(m, "notify_url") }},
		{"utc expire", "PARAM_ERROR", func(m map[string]any) { m["time_expire"] = "2099-01-02T03:04:05Z" }},
		{"past expire", "PARAM_ERROR", func(m map[string]any) { m["time_expire"] = "2001-01-02T03:04:05+08:00" }},
		{"typo field", "PARAM_ERROR", func(m map[string]any) { m["out_trade_number"] = "x" }},
		{"no description", "PARAM_ERROR", func(m map[string]any) { m["description"] = "" }},
	}
	for _, tc := range cases {
		status, e, _, _ := call(t, f, http.MethodPost, "/v3/pay/transactions/jsapi", jsapi(tc.edit), nil)
		require.Equal(t, http.StatusBadRequest, status, tc.name)
		require.Equal(t, tc.code, e.Code, tc.name)
	}
	require.Empty(t, f.Orders())
}

func TestAnswersAndNotificationsAreSignedAndEncrypted(t *testing.T) {
	t.Parallel()
	for _, certMode := range []bool{false, true} {
		var opts []Option
		if certMode {
			opts = append(opts, WithCertificateMode())
		}
		f := New(t, opts...)
		if certMode { // the serial WeChat names is the certificate's
			block, _ := pem.Decode(f.CertificatePEM())
			cert, err := x509.ParseCertificate(block.Bytes)
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("%X", cert.SerialNumber), f.Serial())
		}
		verify := func(h http.Header, body []byte) error {
			require.Equal(t, f.Serial(), h.Get("Wechatpay-Serial"))
			sig, err := base64.StdEncoding.DecodeString(h.Get("Wechatpay-Signature"))
			require.NoError(t, err)
			sum := sha256.Sum256([]byte(h.Get("Wechatpay-Timestamp") + "\n" + h.Get("Wechatpay-Nonce") + "\n" + string(body) + "\n"))
			return rsa.VerifyPKCS1v15(f.PlatformPublicKey(), crypto.SHA256, sum[:], sig)
		}
		status, _, h, body := call(t, f, http.MethodPost, "/v3/pay/transactions/jsapi", jsapi(nil), nil)
		require.Equal(t, http.StatusOK, status)
		require.NoError(t, verify(h, body))
		require.Error(t, verify(h, append(body, ' ')))

		h, body = f.PaymentNotification("fake_0001", 100)
		require.NoError(t, verify(h, body))
		var env struct {
			EventType string                             `json:"event_type"`
			Resource  struct{ Ciphertext, Nonce string } `json:"resource"`
		}
		require.NoError(t, json.Unmarshal(body, &env))
		require.Equal(t, "TRANSACTION.SUCCESS", env.EventType)
		ct, err := base64.StdEncoding.DecodeString(env.Resource.Ciphertext)
		require.NoError(t, err)
		aesBlock, err := aes.NewCipher([]byte(DefaultAPIv3Key))
		require.NoError(t, err)
		gcm, err := cipher.NewGCM(aesBlock)
		require.NoError(t, err)
		plain, err := gcm.Open(nil, []byte(env.Resource.Nonce), ct, []byte("transaction"))
		require.NoError(t, err)
		var tx map[string]any
		require.NoError(t, json.Unmarshal(plain, &tx))
		require.Equal(t, "fake_0001", tx["out_trade_no"])
		require.Equal(t, "SUCCESS", tx["trade_state"])
		require.Equal(t, DefaultMchID, tx["mchid"])
	}
}
