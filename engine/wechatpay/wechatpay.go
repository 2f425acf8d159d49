// Package wechatpay is a merchant-side client for the WeChat Pay API v3 (direct merchant, JSAPI
// payments). It owns the wire protocol and nothing else: signing requests with the merchant key,
// verifying WeChat's signed answers and notifications against the platform keys, decrypting
// notification resources with the API v3 key, and the order / close / query / refund calls.
// It knows nothing about bookings or holds — callers derive out_trade_no and decide what a payment
// means — and it must import no other slotwheel package, so it can be reused and tested in
// isolation against wechatpayfake.
package wechatpay

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// DefaultAPIBase is WeChat Pay's main API domain (api2.mch.weixin.qq.com is the fallback).
const DefaultAPIBase = "https://api.mch.weixin.qq.com"

const (
	authScheme   = "WECHATPAY2-SHA256-RSA2048"
	maxClockSkew = 5 * time.Minute // WeChat's and the SDKs' replay window, both directions
	maxBody      = 1 << 20
)

var userAgent = "wechatpay-v3-client/1.0 (" + runtime.GOOS + ") Go/" + runtime.Version()

// Sentinel errors; returned errors wrap them with context, test with errors.Is.
var (
	ErrBadSignature   = errors.New("wechatpay: bad signature")
	ErrUnknownSerial  = errors.New("wechatpay: unknown platform key serial")
	ErrStaleTimestamp = errors.New("wechatpay: timestamp outside the 5 minute window")
	ErrDecrypt        = errors.New("wechatpay: cannot decrypt resource")
	ErrMismatch       = errors.New("wechatpay: resource belongs to another mchid/appid")
)

// Config holds the merchant credentials. PlatformKeys maps the value WeChat puts in Wechatpay-Serial
// (a platform certificate serial in uppercase hex, or a "PUB_KEY_ID_..." WeChat Pay public key id)
// to the key; during a key rotation both old and new keys must be present.
type Config struct {
	MchID          string
	MerchantSerial string // serial of the merchant API certificate whose key is PrivateKey
	PrivateKey     *rsa.PrivateKey
	APIv3Key       []byte // 32 bytes, set in the merchant platform; decrypts notifications
	PlatformKeys   map[string]*rsa.PublicKey
	AppID          string // the Mini Program / Official Account the payer uses
	NotifyURL      string // where WeChat posts payment and refund notifications
	APIBase        string // default DefaultAPIBase; tests point it at wechatpayfake
	HTTPClient     *http.Client
	Now            func() time.Time // default time.Now; drives signing timestamps and freshness checks
}

// Client talks to WeChat Pay. It is safe for concurrent use.
type Client struct {
	cfg  Config
	keys map[string]*rsa.PublicKey
	http *http.Client
	now  func() time.Time
}

// New validates cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	switch {
	case cfg.MchID == "":
		return nil, errors.New("wechatpay: Config.MchID is required")
	case cfg.MerchantSerial == "":
		return nil, errors.New("wechatpay: Config.MerchantSerial is required")
	case cfg.PrivateKey == nil:
		return nil, errors.New("wechatpay: Config.PrivateKey is required")
	case cfg.PrivateKey.N.BitLen() < 2048:
		return nil, fmt.Errorf("wechatpay: Config.PrivateKey is %d bits, WeChat Pay requires RSA 2048", cfg.PrivateKey.N.BitLen())
	case len(cfg.APIv3Key) != 32:
		return nil, fmt.Errorf("wechatpay: Config.APIv3Key must be 32 bytes, got %d", len(cfg.APIv3Key))
	case len(cfg.PlatformKeys) == 0:
		return nil, errors.New("wechatpay: Config.PlatformKeys needs at least one platform certificate or public key")
	case cfg.AppID == "":
		return nil, errors.New("wechatpay: Config.AppID is required")
	}
	if u, err := url.Parse(cfg.NotifyURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" {
		// WeChat rejects notify_url values that are relative or carry a query string.
		return nil, fmt.Errorf("wechatpay: Config.NotifyURL %q must be an absolute http(s) URL without query", cfg.NotifyURL)
	}
	if cfg.APIBase == "" {
		cfg.APIBase = DefaultAPIBase
	}
	if u, err := url.Parse(cfg.APIBase); err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("wechatpay: Config.APIBase %q is not an absolute URL", cfg.APIBase)
	}
	cfg.APIBase = strings.TrimRight(cfg.APIBase, "/")
	c := &Client{cfg: cfg, keys: make(map[string]*rsa.PublicKey, len(cfg.PlatformKeys)), http: cfg.HTTPClient, now: cfg.Now}
	for serial, k := range cfg.PlatformKeys { // copied so later edits to the caller's map cannot race
		if serial == "" || k == nil {
			return nil, fmt.Errorf("wechatpay: Config.PlatformKeys has an empty serial or nil key (%q)", serial)
		}
		c.keys[serial] = k
	}
	c.cfg.APIv3Key = bytes.Clone(cfg.APIv3Key)
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second}
	}
	if c.now == nil {
		c.now = time.Now
	}
	// Sign once now so a key the crypto library refuses fails here, not inside PaymentParams.
	if _, err := c.sign("probe"); err != nil {
		return nil, fmt.Errorf("wechatpay: Config.PrivateKey cannot sign: %w", err)
	}
	return c, nil
}

// APIError is a non-2xx answer from WeChat Pay. Code is WeChat's machine-readable code
// (SIGN_ERROR, PARAM_ERROR, ORDERPAID, ORDER_NOT_EXIST, ...).
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("wechatpay: HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// ErrorCode returns the WeChat error code carried by err, or "" if err is not an *APIError.
func ErrorCode(err error) string {
	if ae, ok := errors.AsType[*APIError](err); ok {
		return ae.Code
	}
	return ""
}

func (c *Client) sign(message string) (string, error) {
	sum := sha256.Sum256([]byte(message))
	sig, err := rsa.SignPKCS1v15(rand.Reader, c.cfg.PrivateKey, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// authorization builds the WECHATPAY2-SHA256-RSA2048 header over method, path-with-query,
// timestamp, nonce and the exact body bytes sent.
func (c *Client) authorization(method, uri string, body []byte) (string, error) {
	ts := strconv.FormatInt(c.now().Unix(), 10)
	nonce := rand.Text()
	sig, err := c.sign(method + "\n" + uri + "\n" + ts + "\n" + nonce + "\n" + string(body) + "\n")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(`%s mchid="%s",nonce_str="%s",signature="%s",timestamp="%s",serial_no="%s"`,
		authScheme, c.cfg.MchID, nonce, sig, ts, c.cfg.MerchantSerial), nil
}

// verify checks a WeChat-signed message (API answer or notification): known serial, fresh
// timestamp, then RSA-SHA256 over "timestamp\nnonce\nbody\n". WeChat occasionally sends
// deliberately broken "WECHATPAY/SIGNTEST/" signatures to probe that merchants verify; they fail here.
func (c *Client) verify(h http.Header, body []byte) error {
	serial, ts := h.Get("Wechatpay-Serial"), h.Get("Wechatpay-Timestamp")
	nonce, sig := h.Get("Wechatpay-Nonce"), h.Get("Wechatpay-Signature")
	if serial == "" || ts == "" || nonce == "" || sig == "" {
		return fmt.Errorf("%w: missing Wechatpay-Serial/Timestamp/Nonce/Signature header", ErrBadSignature)
	}
	key, ok := c.keys[serial]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownSerial, serial)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: malformed Wechatpay-Timestamp %q", ErrBadSignature, ts)
	}
	if d := c.now().Sub(time.Unix(sec, 0)); d > maxClockSkew || d < -maxClockSkew {
		return fmt.Errorf("%w: Wechatpay-Timestamp is %s off", ErrStaleTimestamp, d.Round(time.Second))
	}
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return fmt.Errorf("%w: signature is not base64", ErrBadSignature)
	}
	sum := sha256.Sum256([]byte(ts + "\n" + nonce + "\n" + string(body) + "\n"))
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], raw); err != nil {
		return fmt.Errorf("%w: serial %s", ErrBadSignature, serial)
	}
	return nil
}

// do sends one signed request. Only 2xx answers are signature-checked before use: an error answer
// is reported as-is (a forged error can only make a call fail, never make it succeed).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("wechatpay: encode %s: %w", path, err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.cfg.APIBase+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("wechatpay: %s %s: %w", method, path, err)
	}
	auth, err := c.authorization(method, req.URL.RequestURI(), body)
	if err != nil {
		return fmt.Errorf("wechatpay: sign %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("wechatpay: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("wechatpay: %s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e struct{ Code, Message string }
		if json.Unmarshal(data, &e) != nil || e.Code == "" {
			e.Message = strings.TrimSpace(string(data))
		}
		return &APIError{Status: resp.StatusCode, Code: e.Code, Message: e.Message}
	}
	if err := c.verify(resp.Header, data); err != nil {
		return fmt.Errorf("wechatpay: %s %s: answer: %w", method, path, err)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("wechatpay: %s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}
