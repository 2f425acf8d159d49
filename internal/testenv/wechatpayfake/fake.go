// Package wechatpayfake is an in-process imitation of the WeChat Pay API v3 merchant endpoints
// used by package wechatpay (JSAPI order, close, query, refund), for tests. Like
// WeChat it verifies every request's WECHATPAY2-SHA256-RSA2048 signature against the merchant
// public key, validates bodies, signs its answers with a platform key, and delivers AES-256-GCM
// encrypted, signed notifications. Its crypto is written independently of package wechatpay
// (which it imports only for the Config type) so that round trips test both sides.
package wechatpayfake

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotwheel/slotwheel/engine/wechatpay"
)

// Defaults, overridable with options.
const (
	DefaultMchID          = "1900000109"
	DefaultAppID          = "wxd678efh567hg6787"
	DefaultMerchantSerial = "3775B6A45ACD588826D15E583A95F5DD2C8A5C2E"
	DefaultAPIv3Key       = "fake-apiv3-key-0123456789abcdefg" // 32 bytes
	// DefaultNotifyURL never resolves (.invalid): set Config.NotifyURL to a receiver before Pay.
	DefaultNotifyURL = "https://merchant.invalid/wechatpay/notify"
)

var cst = time.FixedZone("CST", 8*60*60)

var (
	keysOnce                 sync.Once
	merchantKey, platformKey *rsa.PrivateKey
	errMerchant, errPlatform error
	outTradeNoRe             = regexp.MustCompile(`^[A-Za-z0-9_*-]{6,32}$`)
	outRefundNoRe            = regexp.MustCompile(`^[A-Za-z0-9_*|@-]{1,64}$`)
	timeExpireRe             = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$`)
)

// sharedKeys generates the two RSA-2048 keys once per test binary: generation takes seconds
// under -race and every Fake (and every test) can share them.
func sharedKeys() {
	keysOnce.Do(func() {
		var wg sync.WaitGroup
		wg.Go(func() { merchantKey, errMerchant = rsa.GenerateKey(rand.Reader, 2048) })
		platformKey, errPlatform = rsa.GenerateKey(rand.Reader, 2048)
		wg.Wait()
	})
	if errMerchant != nil || errPlatform != nil {
		panic(fmt.Sprintf("wechatpayfake: generating keys: %v %v", errMerchant, errPlatform))
	}
}

// MerchantKey is a throwaway merchant API key shared by all tests in the binary; a Fake without
// WithMerchant expects requests signed with it, and Config fills it in.
func MerchantKey() *rsa.PrivateKey { sharedKeys(); return merchantKey }

// Fake is a running fake WeChat Pay server. Its methods are safe for concurrent use; the helpers
// that deliver notifications report failures with t.Errorf, so they may run on any goroutine.
type Fake struct {
	t              testing.TB
	srv            *httptest.Server
	mchID, appID   string
	merchantSerial string
	merchantPub    *rsa.PublicKey
	ownMerchant    bool // merchantPub is MerchantKey's, so Config can supply the private key
	apiV3Key       []byte
	platform       *rsa.PrivateKey
	certMode       bool
	pubKeyID       string
	certDER        []byte
	certSerial     string
	now            func() time.Time
	notifyClient   *http.Client

	mu        sync.Mutex
	seq       int
	orders    map[string]*Order
	orderSeq  []string
	closed    []string
	refunds   map[string]*Refund
	refundSeq []string
	requests  []Request
}

// Option configures a Fake.
type Option func(*Fake)

// WithMerchant sets the merchant id and the serial and public key its requests must be signed with.
func WithMerchant(mchID, serial string, pub *rsa.PublicKey) Option {
	return func(f *Fake) { f.mchID, f.merchantSerial, f.merchantPub, f.ownMerchant = mchID, serial, pub, false }
}

// WithAppID sets the appid orders must carry.
func WithAppID(appID string) Option { return func(f *Fake) { f.appID = appID } }

// WithAPIv3Key sets the 32-byte key notifications are encrypted with.
func WithAPIv3Key(key []byte) Option {
	return func(f *Fake) { f.apiV3Key = append([]byte(nil), key...) }
}

// WithCertificateMode makes the fake identify its signing key by a self-signed platform
// certificate's serial instead of a "PUB_KEY_ID_..." WeChat Pay public key id.
func WithCertificateMode() Option { return func(f *Fake) { f.certMode = true } }

// WithClock sets the fake's notion of now (signature freshness, timestamps it emits).
func WithClock(now func() time.Time) Option { return func(f *Fake) { f.now = now } }

// New starts a fake WeChat Pay API server, closed when t ends.
func New(t testing.TB, opts ...Option) *Fake {
	t.Helper()
	sharedKeys()
	f := &Fake{
		t: t, mchID: DefaultMchID, appID: DefaultAppID, merchantSerial: DefaultMerchantSerial,
		merchantPub: &merchantKey.PublicKey, ownMerchant: true, apiV3Key: []byte(DefaultAPIv3Key),
		platform: platformKey, now: time.Now, notifyClient: &http.Client{Timeout: 10 * time.Second},
		orders: map[string]*Order{}, refunds: map[string]*Refund{},
	}
	for _, o := range opts {
		o(f)
	}
	if len(f.apiV3Key) != 32 {
		t.Fatalf("wechatpayfake: API v3 key must be 32 bytes, got %d", len(f.apiV3Key))
	}
	f.pubKeyID = "PUB_KEY_ID_01" + randDigits(26)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 159))
	if err != nil {
		t.Fatal(err)
	}
	f.certDER, err = selfSignedCert(f.platform, serial, f.now())
	if err != nil {
		t.Fatalf("wechatpayfake: platform certificate: %v", err)
	}
	f.certSerial = fmt.Sprintf("%X", serial)
	f.srv = httptest.NewTLSServer(f.routes())
	t.Cleanup(f.srv.Close)
	return f
}

// URL is the API base URL.
func (f *Fake) URL() string { return f.srv.URL }

// Serial is what the fake sends in Wechatpay-Serial: the PUB_KEY_ID, or in certificate mode the
// platform certificate serial (uppercase hex).
func (f *Fake) Serial() string {
	if f.certMode {
		return f.certSerial
	}
	return f.pubKeyID
}

// PlatformPublicKey is the key WeChat-side signatures verify with.
func (f *Fake) PlatformPublicKey() *rsa.PublicKey { return &f.platform.PublicKey }

// Config returns a client configuration for this fake. PrivateKey is filled only when the fake
// uses MerchantKey; NotifyURL is DefaultNotifyURL and should be replaced by a test receiver.
func (f *Fake) Config() wechatpay.Config {
	cfg := wechatpay.Config{
		MchID: f.mchID, MerchantSerial: f.merchantSerial, APIv3Key: append([]byte(nil), f.apiV3Key...),
		PlatformKeys: map[string]*rsa.PublicKey{f.Serial(): f.PlatformPublicKey()},
		AppID:        f.appID, NotifyURL: DefaultNotifyURL, APIBase: f.srv.URL, HTTPClient: f.srv.Client(), Now: f.now,
	}
	if f.ownMerchant {
		cfg.PrivateKey = merchantKey
	}
	return cfg
}

// Client builds a wechatpay.Client from Config with notifyURL, failing the test on error.
func (f *Fake) Client(notifyURL string) *wechatpay.Client {
	f.t.Helper()
	cfg := f.Config()
	if notifyURL != "" {
		cfg.NotifyURL = notifyURL
	}
	c, err := wechatpay.New(cfg)
	if err != nil {
		f.t.Fatalf("wechatpayfake: %v", err)
	}
	return c
}

func (f *Fake) signMessage(msg string) string {
	sum := sha256.Sum256([]byte(msg))
	sig, err := rsa.SignPKCS1v15(rand.Reader, f.platform, crypto.SHA256, sum[:])
	if err != nil {
		panic(err) // a key that signed its own certificate cannot fail here
	}
	return base64.StdEncoding.EncodeToString(sig)
}

// signedHeaders are the Wechatpay-* headers WeChat puts on answers and notifications.
func (f *Fake) signedHeaders(h http.Header, serial string, ts time.Time, body []byte, forge bool) {
	stamp, nonce := strconv.FormatInt(ts.Unix(), 10), randText(32)
	msg := stamp + "\n" + nonce + "\n" + string(body) + "\n"
	if forge {
		msg = "WECHATPAY/SIGNTEST/" + msg
	}
	h.Set("Wechatpay-Serial", serial)
	h.Set("Wechatpay-Timestamp", stamp)
	h.Set("Wechatpay-Nonce", nonce)
	h.Set("Wechatpay-Signature", f.signMessage(msg))
	h.Set("Wechatpay-Signature-Type", "WECHATPAY2-SHA256-RSA2048")
}

func (f *Fake) nextID(prefix string, digits int) string {
	f.mu.Lock()
	f.seq++
	n := f.seq
	f.mu.Unlock()
	return prefix + f.now().In(cst).Format("20060102150405") + fmt.Sprintf("%0*d", digits, n)
}

func randText(n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func randDigits(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = '0' + b[i]%10
	}
	return string(b)
}

// json marshalling without HTML escaping keeps bodies byte-identical to what a test inspects.
func marshal(v any) []byte {
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return []byte(strings.TrimSuffix(sb.String(), "\n"))
}
