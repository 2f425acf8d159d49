package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/api/internal/auth"
	"github.com/slotwheel/slotwheel/api/internal/request"
	"github.com/slotwheel/slotwheel/engine/booking"
)

// The log-in routes: a token for anyone in trials (dev log-in), and one for a WeChat user. They
// create no state, so they take no Idempotency-Key.

// A failed WeChat exchange is 401 either way (docs/API.md): wechat_login_failed when WeChat refused
// the code, wechat_unavailable when it could not be reached or answered an HTTP error or something
// that is not JSON.
var (
	errWechatNotConfigured = answer.NewError(http.StatusNotImplemented, "wechat_not_configured", "WeChat log-in is not configured")
	errWechatLoginFailed   = answer.NewError(http.StatusUnauthorized, "wechat_login_failed", "WeChat rejected the log-in code")
	errWechatUnavailable   = answer.NewError(http.StatusUnauthorized, "wechat_unavailable", "WeChat could not be reached")
)

// loginRoutes issue tokens.
type loginRoutes struct {
	request.Reader
	tokens *auth.Tokens
	dev    bool // dev log-in is enabled

	// WeChat code2Session; no app id or secret answers 501 wechat_not_configured.
	wechatAppID, wechatSecret, wechatAPIBase string
	wechat                                   *http.Client
}

type devLoginRequest struct {
	UserID  *string     `json:"user_id"`
	Role    *string     `json:"role"`
	VenueID *request.ID `json:"venue_id"`
}

type tokenResponse struct {
	Token     string `json:"token"`
	ExpiresAt string `json:"expires_at"`
}

// devLogin issues a token for any user, role and venue; only when dev log-in is enabled.
func (rt *loginRoutes) devLogin(c *gin.Context) {
	if !rt.dev {
		rt.Fail(c, answer.ErrNotFound)
		return
	}
	var req devLoginRequest
	if !rt.Bind(c, &req) {
		return
	}
	if req.UserID == nil {
		rt.Fail(c, request.Missing("user_id"))
		return
	}
	if !auth.ValidUserID(*req.UserID) {
		rt.Fail(c, answer.Unprocessable("invalid_user_id", "user_id must be 1..128 of A-Z a-z 0-9 - _ . : @").WithField("user_id"))
		return
	}
	a := booking.Actor{UserID: *req.UserID, Role: booking.RoleUser}
	if req.Role != nil {
		a.Role = *req.Role
	}
	switch {
	case !slices.Contains(booking.Roles(), a.Role):
		rt.Fail(c, answer.Unprocessable("invalid_role", "role must be user, staff, manager or admin").WithField("role"))
		return
	case booking.VenueRole(a.Role):
		if req.VenueID == nil {
			rt.Fail(c, request.Missing("venue_id"))
			return
		}
		a.VenueID = uint64(*req.VenueID)
	}
	rt.writeToken(c, a)
}

func (rt *loginRoutes) writeToken(c *gin.Context, a booking.Actor) {
	tok, exp, err := rt.tokens.Issue(a)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, tokenResponse{Token: tok, ExpiresAt: exp.UTC().Format(time.RFC3339)})
}

type wechatLoginRequest struct {
	Code *string `json:"code"`
}

// code2SessionResponse is WeChat's answer to jscode2session.
type code2SessionResponse struct {
	OpenID  string `json:"openid"`
	ErrCode int    `json:"errcode"`
	ErrMsg  string `json:"errmsg"`
}

// wechatLogin exchanges a wx.login code for the user's openid through code2Session; the openid
// becomes the subject booking.WechatUserID(openid).
func (rt *loginRoutes) wechatLogin(c *gin.Context) {
	var req wechatLoginRequest
	if !rt.Bind(c, &req) {
		return
	}
	if req.Code == nil {
		rt.Fail(c, request.Missing("code"))
		return
	}
	if *req.Code == "" || len(*req.Code) > 256 {
		rt.Fail(c, answer.Unprocessable("invalid_code", "code must be 1..256 characters").WithField("code"))
		return
	}
	if rt.wechatAppID == "" || rt.wechatSecret == "" {
		rt.Fail(c, errWechatNotConfigured)
		return
	}
	openID, err := rt.code2Session(c, *req.Code)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	rt.writeToken(c, booking.Actor{UserID: booking.WechatUserID(openID), Role: booking.RoleUser})
}

func (rt *loginRoutes) code2Session(c *gin.Context, code string) (string, error) {
	q := url.Values{
		"appid":      {rt.wechatAppID},
		"secret":     {rt.wechatSecret},
		"js_code":    {code},
		"grant_type": {"authorization_code"},
	}
	u := strings.TrimRight(rt.wechatAPIBase, "/") + "/sns/jscode2session?" + q.Encode()
	req, err := http.NewRequestWithContext(c.Request.Context(), http.MethodGet, u, nil)
	if err != nil {
		return "", fmt.Errorf("code2session request: %w", err)
	}
	resp, err := rt.wechat.Do(req)
	if err != nil {
		rt.Log.WarnContext(c.Request.Context(), "wechat code2session failed", "request_id", answer.RequestIDOf(c),
			"err", redactSecret(err, rt.wechatSecret))
		return "", errWechatUnavailable
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil || resp.StatusCode != http.StatusOK {
		rt.Log.WarnContext(c.Request.Context(), "wechat code2session failed", "request_id", answer.RequestIDOf(c), "status", resp.StatusCode, "err", err)
		return "", errWechatUnavailable
	}
	var out code2SessionResponse
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&out); err != nil {
		rt.Log.WarnContext(c.Request.Context(), "wechat code2session answer unreadable", "request_id", answer.RequestIDOf(c), "err", err)
		return "", errWechatUnavailable
	}
	if out.ErrCode != 0 || !answer.SaneToken(out.OpenID, 128) {
		rt.Log.InfoContext(c.Request.Context(), "wechat log-in refused", "request_id", answer.RequestIDOf(c), "errcode", out.ErrCode, "errmsg", out.ErrMsg)
		return "", errWechatLoginFailed
	}
	return out.OpenID, nil
}

// redactSecret keeps the app secret, which travels in the query string, out of logged URL errors.
func redactSecret(err error, secret string) string {
	msg := err.Error()
	if secret != "" {
		msg = strings.ReplaceAll(msg, url.QueryEscape(secret), "REDACTED")
		msg = strings.ReplaceAll(msg, secret, "REDACTED")
	}
	return msg
}
