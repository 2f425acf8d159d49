// Package wechatmsg owns slotwheel's calls to WeChat for mini-program subscribe messages: the
// cached access token of the app, subscribeMessage.send with the classification of its error codes
// into permanent and retryable, and fitting values to WeChat's per-type limits. Deciding when to
// notify, and retrying, belong to the caller.
//
// It imports only the standard library and must import no other slotwheel package, so that any
// layer can use it without import cycles. Package wechatfake plays the WeChat API in tests.
package wechatmsg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// DefaultAPIBase is WeChat's API host.
const DefaultAPIBase = "https://api.weixin.qq.com"

const (
	// tokenMargin is how long before WeChat's stated expiry a token is dropped: WeChat may retire
	// it early, and requests in flight need slack.
	tokenMargin = 5 * time.Minute
	// fetchTimeout bounds a shared token fetch, which runs detached from any one caller's context.
	fetchTimeout = 10 * time.Second
	// maxResponse bounds what is read of a WeChat answer; real ones are a few hundred bytes.
	maxResponse = 1 << 20
)

// WeChat error codes this package acts on.
const (
	CodeInvalidCredential = 40001 // access token invalid, or replaced by a newer one
	CodeInvalidOpenID     = 40003
	CodeInvalidToken      = 40014
	CodeInvalidTemplateID = 40037
	CodeInvalidPage       = 41030
	CodeTokenExpired      = 42001
	CodeNotSubscribed     = 43101 // the user refused, or used up, the subscription
	CodeArgumentInvalid   = 47003 // a data value is missing or breaks its type's limits
)

var (
	// ErrNotSubscribed means the user has not (or no longer) subscribed to the template. Retrying
	// cannot help until the user subscribes again in the mini-program.
	ErrNotSubscribed = errors.New("wechatmsg: user has not subscribed to the template")
	// ErrRejected means WeChat refused the message itself (openid, template, page or data), so
	// the same message will never be accepted.
	ErrRejected = errors.New("wechatmsg: message rejected")
)

// defaultHTTP bounds every request when the caller gives no client: http.DefaultClient waits
// forever on a stuck connection.
var defaultHTTP = &http.Client{Timeout: 10 * time.Second}

// APIError is an errcode answer from WeChat. errors.Is(err, ErrNotSubscribed) and
// errors.Is(err, ErrRejected) classify it; errors.As recovers the code.
type APIError struct {
	Op   string // the endpoint path, "/cgi-bin/token" or "/cgi-bin/message/subscribe/send"
	Code int
	Msg  string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("wechatmsg: %s: errcode %d: %s", e.Op, e.Code, e.Msg)
}

// Is makes a send's error codes match the sentinel errors; the same codes from another endpoint
// mean something else and match nothing.
func (e *APIError) Is(target error) bool {
	if e.Op != pathSend {
		return false
	}
	switch target {
	case ErrNotSubscribed:
		return e.Code == CodeNotSubscribed
	case ErrRejected:
		switch e.Code {
		case CodeInvalidOpenID, CodeInvalidTemplateID, CodeInvalidPage, CodeArgumentInvalid:
			return true
		}
	}
	return false
}

// Permanent reports whether err means the message must not be sent again: the user is not
// subscribed, or WeChat rejected the message. Any other error (network, HTTP status, system busy,
// rate limit, token trouble) is worth retrying later.
func Permanent(err error) bool {
	return errors.Is(err, ErrNotSubscribed) || errors.Is(err, ErrRejected)
}

const (
	pathToken = "/cgi-bin/token"
	pathSend  = "/cgi-bin/message/subscribe/send"
)

// Client calls WeChat for one mini-program. Set the fields before first use and do not change them
// afterwards; a Client is safe for concurrent use and must not be copied.
type Client struct {
	AppID  string
	Secret string // the AppSecret; it never appears in errors
	// APIBase is the API host; empty means DefaultAPIBase. Tests point it at wechatfake.
	APIBase string
	// HTTP carries the requests; nil means a client with a 10 s timeout.
	HTTP *http.Client
	// Now is the clock for token expiry; nil means time.Now.
	Now func() time.Time

	mu      sync.Mutex
	token   string
	expiry  time.Time   // token is used while Now is before expiry
	pending *tokenFetch // the fetch under way, shared by every caller that needs a token now
}

// tokenFetch is one token request; token and err are written before done is closed.
type tokenFetch struct {
	done  chan struct{}
	token string
	err   error
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return defaultHTTP
}

func (c *Client) endpoint(path string, q url.Values) string {
	base := c.APIBase
	if base == "" {
		base = DefaultAPIBase
	}
	return strings.TrimRight(base, "/") + path + "?" + q.Encode()
}

// AccessToken returns the app's access token, from memory while it is fresh. Concurrent callers
// that find no fresh token share one request: WeChat limits token fetches per day, and each fetch
// replaces the previous token. The shared request does not depend on the context of the caller
// who started it, so that caller giving up does not fail the others; each caller waits only as
// long as its own ctx allows.
func (c *Client) AccessToken(ctx context.Context) (string, error) {
	c.mu.Lock()
	if c.token != "" && c.now().Before(c.expiry) {
		tok := c.token
		c.mu.Unlock()
		return tok, nil
	}
	f := c.pending
	if f == nil {
		f = &tokenFetch{done: make(chan struct{})}
		c.pending = f
		go c.fetchToken(context.WithoutCancel(ctx), f)
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.token, f.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (c *Client) fetchToken(ctx context.Context, f *tokenFetch) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	// Expiry counts from before the request, so time spent waiting for WeChat is on the safe side.
	start := c.now()
	tok, ttl, err := c.requestToken(ctx)
	c.mu.Lock()
	if err == nil {
		c.token, c.expiry = tok, start.Add(lifetime(ttl))
	}
	c.pending = nil
	c.mu.Unlock()
	f.token, f.err = tok, err
	close(f.done)
}

// lifetime is how long a token WeChat says lives ttl is used: ttl less the safety margin, but at
// least half of ttl, so a short-lived token is still shared rather than refetched on every send.
func lifetime(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return 0
	}
	return ttl - min(tokenMargin, ttl/2)
}

func (c *Client) requestToken(ctx context.Context) (string, time.Duration, error) {
	q := url.Values{
		"grant_type": {"client_credential"},
		"appid":      {c.AppID},
		"secret":     {c.Secret},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoint(pathToken, q), nil)
	if err != nil {
		return "", 0, fmt.Errorf("wechatmsg: %s: %w", pathToken, unwrapURL(err))
	}
	var out struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
		ErrCode     int    `json:"errcode"`
		ErrMsg      string `json:"errmsg"`
	}
	if err := c.do(req, pathToken, &out); err != nil {
		return "", 0, err
	}
	if out.ErrCode != 0 {
		return "", 0, &APIError{Op: pathToken, Code: out.ErrCode, Msg: out.ErrMsg}
	}
	if out.AccessToken == "" {
		return "", 0, fmt.Errorf("wechatmsg: %s: answer has no access_token", pathToken)
	}
	return out.AccessToken, time.Duration(out.ExpiresIn) * time.Second, nil
}

// invalidate drops tok if it is still the cached token; a newer token fetched meanwhile by
// another caller stays.
func (c *Client) invalidate(tok string) {
	c.mu.Lock()
	if c.token == tok {
		c.token = ""
	}
	c.mu.Unlock()
}

// do sends req and decodes WeChat's JSON answer into out. Errors name only the path: the query
// holds the AppSecret or the access token.
func (c *Client) do(req *http.Request, path string, out any) error {
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("wechatmsg: %s: %w", path, unwrapURL(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("wechatmsg: %s: reading answer: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("wechatmsg: %s: HTTP %d", path, resp.StatusCode)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("wechatmsg: %s: decoding answer: %w", path, err)
	}
	return nil
}

// unwrapURL drops the *url.Error wrapper, whose message repeats the URL with its credentials.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Message is one subscribe message.
type Message struct {
	ToUser     string            // the user's openid
	TemplateID string            // the subscribe template
	Page       string            // mini-program page opened from the message; empty for none
	Data       map[string]string // template key ("thing1", "time2", ...) to value
	// MiniprogramState is the mini-program version the page opens in: "developer", "trial" or
	// "formal"; empty means formal.
	MiniprogramState string
}

type sendValue struct {
	Value string `json:"value"`
}

type sendBody struct {
	ToUser           string               `json:"touser"`
	TemplateID       string               `json:"template_id"`
	Page             string               `json:"page,omitempty"`
	Data             map[string]sendValue `json:"data"`
	MiniprogramState string               `json:"miniprogram_state,omitempty"`
	Lang             string               `json:"lang"`
}

// Send delivers m. Every data value goes through FitValue first, since WeChat rejects the whole
// message when one value is over its type's limit. A nil error means WeChat accepted the message.
// When WeChat reports the token invalid or expired, Send fetches a new one and tries exactly once
// more. Use Permanent to tell errors not worth retrying.
func (c *Client) Send(ctx context.Context, m Message) error {
	switch {
	case m.ToUser == "":
		return fmt.Errorf("%w: no openid", ErrRejected)
	case m.TemplateID == "":
		return fmt.Errorf("%w: no template id", ErrRejected)
	case len(m.Data) == 0:
		return fmt.Errorf("%w: no data", ErrRejected)
	}
	b := sendBody{
		ToUser:           m.ToUser,
		TemplateID:       m.TemplateID,
		Page:             m.Page,
		Data:             make(map[string]sendValue, len(m.Data)),
		MiniprogramState: m.MiniprogramState,
		Lang:             "zh_CN",
	}
	for k, v := range m.Data {
		v = FitValue(k, v)
		if v == "" {
			// WeChat answers 47003 for an empty value; no need to ask.
			return fmt.Errorf("%w: data %s is empty", ErrRejected, k)
		}
		b.Data[k] = sendValue{Value: v}
	}
	body, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("wechatmsg: encoding message: %w", err)
	}
	for attempt := 1; ; attempt++ {
		tok, err := c.AccessToken(ctx)
		if err != nil {
			return err
		}
		err = c.send(ctx, tok, body)
		var apiErr *APIError
		if attempt == 1 && errors.As(err, &apiErr) && tokenRejected(apiErr.Code) {
			c.invalidate(tok)
			continue
		}
		return err
	}
}

func tokenRejected(code int) bool {
	return code == CodeInvalidCredential || code == CodeTokenExpired || code == CodeInvalidToken
}

func (c *Client) send(ctx context.Context, tok string, body []byte) error {
	u := c.endpoint(pathSend, url.Values{"access_token": {tok}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("wechatmsg: %s: %w", pathSend, unwrapURL(err))
	}
	req.Header.Set("Content-Type", "application/json")
	var out struct {
		ErrCode int    `json:"errcode"`
		ErrMsg  string `json:"errmsg"`
	}
	if err := c.do(req, pathSend, &out); err != nil {
		return err
	}
	if out.ErrCode != 0 {
		return &APIError{Op: pathSend, Code: out.ErrCode, Msg: out.ErrMsg}
	}
	return nil
}
