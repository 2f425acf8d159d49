// Package wechatfake plays the WeChat API in tests: access tokens (/cgi-bin/token), subscribe
// messages (/cgi-bin/message/subscribe/send) and mini-program login (/sns/jscode2session), on an
// httptest server, with switches for the failures real WeChat produces. One Fake serves a whole
// end-to-end test.
//
// It imports only the standard library and must import no other slotwheel package. In particular
// it checks data values against WeChat's published limits on its own rather than calling
// wechatmsg.FitValue, so a mistake in FitValue shows up as a rejected message.
package wechatfake

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"
)

// Message is a subscribe message the fake accepted.
type Message struct {
	ToUser           string
	TemplateID       string
	Page             string
	MiniprogramState string
	Lang             string
	Data             map[string]string // key to value
}

type tokenState int

const (
	tokenValid tokenState = iota
	tokenExpired
	tokenInvalid
)

// Fake is a fake WeChat API for one mini-program. Its methods are safe for concurrent use.
type Fake struct {
	// URL is the base URL to use as wechatmsg.Client.APIBase.
	URL string

	srv    *httptest.Server
	appID  string
	secret string

	mu           sync.Mutex
	tokens       map[string]tokenState
	current      string
	issued       int
	expiresIn    int
	sends        int
	messages     []Message
	unsubscribed map[string]bool
	codes        map[string]string // js_code to openid
	usedCodes    map[string]bool
	failNext     []int // HTTP statuses for the next send requests
	rejectNext   []apiError
}

type apiError struct {
	ErrCode int    `json:"errcode"`
	ErrMsg  string `json:"errmsg"`
}

// New starts a fake for the app appID with AppSecret secret; it stops when the test ends.
func New(t testing.TB, appID, secret string) *Fake {
	t.Helper()
	f := &Fake{
		appID:        appID,
		secret:       secret,
		tokens:       map[string]tokenState{},
		expiresIn:    7200,
		unsubscribed: map[string]bool{},
		codes:        map[string]string{},
		usedCodes:    map[string]bool{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/cgi-bin/token", f.handleToken)
	mux.HandleFunc("/cgi-bin/message/subscribe/send", f.handleSend)
	mux.HandleFunc("/sns/jscode2session", f.handleCode2Session)
	f.srv = httptest.NewServer(mux)
	f.URL = f.srv.URL
	t.Cleanup(f.srv.Close)
	return f
}

// Client returns an HTTP client for the fake's server.
func (f *Fake) Client() *http.Client { return f.srv.Client() }

// SetExpiresIn sets the expires_in, in seconds, of tokens issued from now on (default 7200).
func (f *Fake) SetExpiresIn(seconds int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expiresIn = seconds
}

// TokenFetches is how many tokens the fake has issued; they are numbered "token-1", "token-2", ...
func (f *Fake) TokenFetches() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.issued
}

// Expire makes the current token answer 42001 (expired) from now on.
func (f *Fake) Expire() { f.setCurrent(tokenExpired) }

// Invalidate makes the current token answer 40001 (invalid credential) from now on.
func (f *Fake) Invalidate() { f.setCurrent(tokenInvalid) }

func (f *Fake) setCurrent(s tokenState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.current != "" {
		f.tokens[f.current] = s
	}
}

// Unsubscribe makes sends to openid answer 43101, as when the user refused the subscription.
func (f *Fake) Unsubscribe(openid string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unsubscribed[openid] = true
}

// Subscribe undoes Unsubscribe.
func (f *Fake) Subscribe(openid string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.unsubscribed, openid)
}

// FailNextSend makes the next send request answer the HTTP status with no body, as a broken proxy
// or an outage would. Calls queue up.
func (f *Fake) FailNextSend(status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext = append(f.failNext, status)
}

// RejectNextSend makes the next send request with a valid token answer errcode, for codes the fake
// does not produce on its own (-1 system busy, 45009 rate limit, ...). Calls queue up.
func (f *Fake) RejectNextSend(errcode int, errmsg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rejectNext = append(f.rejectNext, apiError{errcode, errmsg})
}

// Sends is how many send requests arrived, whatever the fake answered.
func (f *Fake) Sends() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sends
}

// Messages returns copies of the messages accepted so far, in order.
func (f *Fake) Messages() []Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Message, len(f.messages))
	for i, m := range f.messages {
		m.Data = maps.Clone(m.Data)
		out[i] = m
	}
	return out
}

// Code registers a wx.login code for openid; jscode2session accepts it once, as WeChat does.
func (f *Fake) Code(code, openid string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.codes[code] = openid
	delete(f.usedCodes, code)
}

func writeJSON(w http.ResponseWriter, v any) {
	// WeChat answers errors with HTTP 200 and an errcode; clients must look at the body.
	w.Header().Set("Content-Type", "application/json; encoding=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, apiError{ErrCode: code, ErrMsg: fmt.Sprintf(format, args...) + " rid: fake"})
}

// checkApp answers false after writing the error WeChat gives for wrong app credentials.
func (f *Fake) checkApp(w http.ResponseWriter, r *http.Request) bool {
	q := r.URL.Query()
	switch {
	case q.Get("appid") != f.appID:
		fail(w, 40013, "invalid appid")
		return false
	case q.Get("secret") != f.secret:
		fail(w, 40125, "invalid appsecret")
		return false
	}
	return true
}

func (f *Fake) handleToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Query().Get("grant_type") != "client_credential" {
		fail(w, 40002, "invalid grant_type")
		return
	}
	if !f.checkApp(w, r) {
		return
	}
	f.mu.Lock()
	f.issued++
	tok := fmt.Sprintf("token-%d", f.issued)
	// Earlier tokens stay usable, like WeChat's overlap after a refresh, unless marked otherwise.
	f.tokens[tok] = tokenValid
	f.current = tok
	ttl := f.expiresIn
	f.mu.Unlock()
	writeJSON(w, map[string]any{"access_token": tok, "expires_in": ttl})
}

type sendRequest struct {
	ToUser           string                              `json:"touser"`
	TemplateID       string                              `json:"template_id"`
	Page             string                              `json:"page"`
	Data             map[string]*struct{ Value *string } `json:"data"`
	MiniprogramState string                              `json:"miniprogram_state"`
	Lang             string                              `json:"lang"`
}

func (f *Fake) handleSend(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sends++
	if len(f.failNext) > 0 {
		status := f.failNext[0]
		f.failNext = f.failNext[1:]
		w.WriteHeader(status)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	tok := r.URL.Query().Get("access_token")
	state, known := f.tokens[tok]
	switch {
	case tok == "":
		fail(w, 41001, "access_token missing")
		return
	case !known || state == tokenInvalid:
		fail(w, 40001, "invalid credential, access_token is invalid or not latest")
		return
	case state == tokenExpired:
		fail(w, 42001, "access_token expired")
		return
	}
	if len(f.rejectNext) > 0 {
		e := f.rejectNext[0]
		f.rejectNext = f.rejectNext[1:]
		writeJSON(w, e)
		return
	}
	var req sendRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		fail(w, 47001, "data format error: %v", err)
		return
	}
	switch {
	case req.ToUser == "":
		fail(w, 40003, "invalid openid")
		return
	case req.TemplateID == "":
		fail(w, 40037, "invalid template_id")
		return
	case len(req.Data) == 0:
		fail(w, 47003, "argument invalid! data is empty")
		return
	case req.Lang != "" && !validLang[req.Lang]:
		fail(w, 47003, "argument invalid! lang %q", req.Lang)
		return
	case req.MiniprogramState != "" && !validState[req.MiniprogramState]:
		fail(w, 47003, "argument invalid! miniprogram_state %q", req.MiniprogramState)
		return
	}
	data := make(map[string]string, len(req.Data))
	for k, v := range req.Data {
		if v == nil || v.Value == nil || *v.Value == "" {
			fail(w, 47003, "argument invalid! data.%s.value is empty", k)
			return
		}
		if !validValue(k, *v.Value) {
			fail(w, 47003, "argument invalid! data.%s.value invalid", k)
			return
		}
		data[k] = *v.Value
	}
	if f.unsubscribed[req.ToUser] {
		fail(w, 43101, "user refuse to accept the msg")
		return
	}
	f.messages = append(f.messages, Message{
		ToUser:           req.ToUser,
		TemplateID:       req.TemplateID,
		Page:             req.Page,
		MiniprogramState: req.MiniprogramState,
		Lang:             req.Lang,
		Data:             data,
	})
	writeJSON(w, apiError{ErrCode: 0, ErrMsg: "ok"})
}

var (
	validLang  = map[string]bool{"zh_CN": true, "en_US": true, "zh_HK": true, "zh_TW": true}
	validState = map[string]bool{"developer": true, "trial": true, "formal": true}
	// amountRe: one optional currency sign, up to 10 digits with an optional decimal part, and
	// an optional trailing 元.
	amountRe = regexp.MustCompile(`^[^\d.]?\d{1,10}(\.\d{1,2})?元?$`)
	numberRe = regexp.MustCompile(`^\d+(\.\d+)?$`)
)

// validValue applies WeChat's published limits (订阅消息参数值内容限制说明) to a value for key.
// Types whose format the table describes only loosely (time, date, enum) just need a value.
func validValue(key, v string) bool {
	n := utf8.RuneCountInString(v)
	kind := strings.TrimRightFunc(key, unicode.IsDigit)
	switch kind {
	case "thing":
		return n <= 20
	case "name":
		return n <= 10 || n <= 20 && all(v, func(r rune) bool { return r < 0x80 })
	case "phrase":
		return n <= 5 && all(v, isHan)
	case "character_string":
		return n <= 32 && all(v, asciiGraphic)
	case "number":
		return n <= 32 && numberRe.MatchString(v)
	case "letter":
		return n <= 32 && all(v, asciiLetter)
	case "symbol":
		return n <= 5 && all(v, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSymbol(r) })
	case "phone_number":
		return n <= 17 && all(v, func(r rune) bool { return asciiGraphic(r) && !asciiLetter(r) })
	case "car_number":
		rs := []rune(v)
		for i, r := range rs {
			if !(asciiLetter(r) || r >= '0' && r <= '9' || isHan(r) && (i == 0 || i == len(rs)-1)) {
				return false
			}
		}
		return n <= 8
	case "amount":
		return amountRe.MatchString(v)
	default:
		return true
	}
}

func all(v string, ok func(rune) bool) bool {
	for _, r := range v {
		if !ok(r) {
			return false
		}
	}
	return true
}

func isHan(r rune) bool        { return unicode.Is(unicode.Han, r) }
func asciiGraphic(r rune) bool { return r > ' ' && r < 0x7f }
func asciiLetter(r rune) bool  { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }

func (f *Fake) handleCode2Session(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	if q.Get("grant_type") != "authorization_code" {
		fail(w, 40002, "invalid grant_type")
		return
	}
	if !f.checkApp(w, r) {
		return
	}
	code := q.Get("js_code")
	f.mu.Lock()
	openid, ok := f.codes[code]
	used := f.usedCodes[code]
	if ok && !used {
		f.usedCodes[code] = true
	}
	f.mu.Unlock()
	switch {
	case code == "":
		fail(w, 41008, "missing code")
	case !ok:
		fail(w, 40029, "invalid code")
	case used:
		fail(w, 40163, "code been used")
	default:
		writeJSON(w, map[string]string{"openid": openid, "session_key": sessionKey()})
	}
}

// sessionKey is random like WeChat's, so no test can come to depend on its value.
func sessionKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}
