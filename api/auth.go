package api

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// claims are the Bearer token's claims. venue_id is read as a string or a number, so that tokens
// minted by other tools work; this package writes it as a string.
type claims struct {
	Role    string  `json:"role"`
	VenueID claimID `json:"venue_id,omitzero"`
	jwt.RegisteredClaims
}

// claimID is an id claim given as a JSON string or number.
type claimID uint64

func (id *claimID) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	if s == "null" || s == "" {
		*id = 0
		return nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("venue_id claim: %w", err)
	}
	*id = claimID(v)
	return nil
}

func (id claimID) MarshalJSON() ([]byte, error) {
	return []byte(`"` + strconv.FormatUint(uint64(id), 10) + `"`), nil
}

// issueToken signs a token for actor that lasts tokenTTL.
func (s *server) issueToken(a booking.Actor) (string, time.Time, error) {
	now := s.now()
	exp := now.Add(tokenTTL)
	c := claims{
		Role:    a.Role,
		VenueID: claimID(a.VenueID),
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   a.UserID,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(exp),
		},
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(s.opts.JWTSecret)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign token: %w", err)
	}
	return tok, exp, nil
}

// tokenCache remembers tokens already verified, until they expire: a mini-program sends the same
// token with every request, and verifying it again (base64, JSON, HMAC) was a fifth of a hold's
// server time. Only a byte-identical token hits, so the cache cannot widen what a token grants.
type tokenCache struct {
	mu sync.Mutex
	m  map[string]cachedToken
}

type cachedToken struct {
	actor booking.Actor
	exp   time.Time
}

// tokenCacheSize bounds the cache; when full it starts over, which costs one verification a token.
const tokenCacheSize = 10000

func (tc *tokenCache) get(tok string, now time.Time) (booking.Actor, bool) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	c, ok := tc.m[tok]
	if !ok || !now.Before(c.exp) {
		return booking.Actor{}, false
	}
	return c.actor, true
}

func (tc *tokenCache) put(tok string, a booking.Actor, exp time.Time) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.m == nil || len(tc.m) >= tokenCacheSize {
		tc.m = make(map[string]cachedToken)
	}
	tc.m[tok] = cachedToken{actor: a, exp: exp}
}

// parseToken verifies a compact HS256 token and returns its actor.
func (s *server) parseToken(tok string) (booking.Actor, error) {
	if a, ok := s.tokens.get(tok, s.now()); ok {
		return a, nil
	}
	a, exp, err := s.verifyToken(tok)
	if err != nil {
		return booking.Actor{}, err
	}
	s.tokens.put(tok, a, exp)
	return a, nil
}

func (s *server) verifyToken(tok string) (booking.Actor, time.Time, error) {
	c, err := s.hs256.verify(tok, s.now())
	if err != nil {
		return booking.Actor{}, time.Time{}, err
	}
	if !validUserID(c.Subject) {
		return booking.Actor{}, time.Time{}, errors.New("token has no valid sub")
	}
	a := booking.Actor{UserID: c.Subject, Role: c.Role}
	switch c.Role {
	case booking.RoleUser, booking.RoleAdmin:
	case booking.RoleStaff:
		if c.VenueID == 0 {
			return booking.Actor{}, time.Time{}, errors.New("staff token without venue_id")
		}
		a.VenueID = uint64(c.VenueID)
	default:
		return booking.Actor{}, time.Time{}, fmt.Errorf("token has unknown role %q", c.Role)
	}
	return a, c.ExpiresAt.Time, nil
}

// bearer returns the token of an "Authorization: Bearer" header.
func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// authenticate requires a valid Bearer token whose role is one of roles.
func (s *server) authenticate(roles ...string) gin.HandlerFunc {
	return func(c *gin.Context) {
		tok, ok := bearer(c.GetHeader("Authorization"))
		if !ok {
			c.Header("WWW-Authenticate", `Bearer realm="slotwheel"`)
			s.fail(c, errUnauthorized)
			return
		}
		a, err := s.parseToken(tok)
		if err != nil {
			c.Header("WWW-Authenticate", `Bearer realm="slotwheel", error="invalid_token"`)
			s.fail(c, errUnauthorized)
			return
		}
		allowed := false
		for _, r := range roles {
			allowed = allowed || a.Role == r
		}
		if !allowed {
			s.fail(c, errForbidden)
			return
		}
		c.Set(ctxActor, a)
		c.Next()
	}
}

func actorOf(c *gin.Context) booking.Actor {
	v, _ := c.Get(ctxActor)
	a, _ := v.(booking.Actor)
	return a
}

// callerOf names the caller in idempotency scopes.
func callerOf(c *gin.Context) string {
	if a := actorOf(c); a.UserID != "" {
		return a.UserID
	}
	return "anon"
}

// validUserID accepts 1..128 characters of letters, digits and "-_.:@", except an erased user's
// pseudonym: nobody may sign in or act as one.
func validUserID(s string) bool {
	return saneToken(strings.ReplaceAll(s, "@", "_"), 128) && !booking.IsPseudonym(s)
}

// dashboardGuard lets in an admin Bearer token, or HTTP Basic with the dashboard credentials (never
// when the dashboard password is empty), so that a person can open the dashboard in a browser.
func (s *server) dashboardGuard() gin.HandlerFunc {
	wantUser := sha256.Sum256([]byte(s.opts.DashboardUser))
	wantPass := sha256.Sum256([]byte(s.opts.DashboardPassword))
	basicOn := s.opts.DashboardPassword != ""
	return func(c *gin.Context) {
		if tok, ok := bearer(c.GetHeader("Authorization")); ok {
			a, err := s.parseToken(tok)
			switch {
			case err != nil:
			case a.Role == booking.RoleAdmin:
				c.Next()
				return
			default:
				s.fail(c, errForbidden)
				return
			}
		} else if user, pass, ok := c.Request.BasicAuth(); ok && basicOn {
			gotUser := sha256.Sum256([]byte(user))
			gotPass := sha256.Sum256([]byte(pass))
			// Both comparisons always run, so timing tells nothing about which one failed.
			u := subtle.ConstantTimeCompare(gotUser[:], wantUser[:])
			p := subtle.ConstantTimeCompare(gotPass[:], wantPass[:])
			if u&p == 1 {
				c.Next()
				return
			}
		}
		c.Header("WWW-Authenticate", `Basic realm="slotwheel"`)
		s.fail(c, errUnauthorized)
	}
}

type devLoginRequest struct {
	UserID  *string `json:"user_id"`
	Role    *string `json:"role"`
	VenueID *jsonID `json:"venue_id"`
}

type tokenResponse struct {
	Token     string `json:"token"`
	ExpiresAt string `json:"expires_at"`
}

// devLogin issues a token for any user, role and venue; only when dev log-in is enabled.
func (s *server) devLogin(c *gin.Context) {
	if !s.opts.DevLogin {
		s.fail(c, errNotFound)
		return
	}
	var req devLoginRequest
	if !s.bind(c, &req) {
		return
	}
	if req.UserID == nil {
		s.fail(c, missing("user_id"))
		return
	}
	if !validUserID(*req.UserID) {
		s.fail(c, unprocessable("invalid_user_id", "user_id must be 1..128 of A-Z a-z 0-9 - _ . : @").withField("user_id"))
		return
	}
	a := booking.Actor{UserID: *req.UserID, Role: booking.RoleUser}
	if req.Role != nil {
		a.Role = *req.Role
	}
	switch a.Role {
	case booking.RoleUser, booking.RoleAdmin:
	case booking.RoleStaff:
		if req.VenueID == nil {
			s.fail(c, missing("venue_id"))
			return
		}
		a.VenueID = uint64(*req.VenueID)
	default:
		s.fail(c, unprocessable("invalid_role", "role must be user, staff or admin").withField("role"))
		return
	}
	s.writeToken(c, a)
}

func (s *server) writeToken(c *gin.Context, a booking.Actor) {
	tok, exp, err := s.issueToken(a)
	if err != nil {
		s.fail(c, err)
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
func (s *server) wechatLogin(c *gin.Context) {
	var req wechatLoginRequest
	if !s.bind(c, &req) {
		return
	}
	if req.Code == nil {
		s.fail(c, missing("code"))
		return
	}
	if *req.Code == "" || len(*req.Code) > 256 {
		s.fail(c, unprocessable("invalid_code", "code must be 1..256 characters").withField("code"))
		return
	}
	if s.opts.WechatAppID == "" || s.opts.WechatSecret == "" {
		s.fail(c, errWechatNotConfigured)
		return
	}
	openID, err := s.code2Session(c, *req.Code)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.writeToken(c, booking.Actor{UserID: booking.WechatUserID(openID), Role: booking.RoleUser})
}

func (s *server) code2Session(c *gin.Context, code string) (string, error) {
	q := url.Values{
		"appid":      {s.opts.WechatAppID},
		"secret":     {s.opts.WechatSecret},
		"js_code":    {code},
		"grant_type": {"authorization_code"},
	}
	u := strings.TrimRight(s.opts.WechatAPIBase, "/") + "/sns/jscode2session?" + q.Encode()
	req, err := http.NewRequestWithContext(c.Request.Context(), http.MethodGet, u, nil)
	if err != nil {
		return "", fmt.Errorf("code2session request: %w", err)
	}
	resp, err := s.wechat.Do(req)
	if err != nil {
		s.log.WarnContext(c.Request.Context(), "wechat code2session failed", "request_id", requestIDOf(c), "err", redactSecret(err, s.opts.WechatSecret))
		return "", errWechatUnavailable
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil || resp.StatusCode != http.StatusOK {
		s.log.WarnContext(c.Request.Context(), "wechat code2session failed", "request_id", requestIDOf(c), "status", resp.StatusCode, "err", err)
		return "", errWechatUnavailable
	}
	var out code2SessionResponse
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&out); err != nil {
		s.log.WarnContext(c.Request.Context(), "wechat code2session answer unreadable", "request_id", requestIDOf(c), "err", err)
		return "", errWechatUnavailable
	}
	if out.ErrCode != 0 || !saneToken(out.OpenID, 128) {
		s.log.InfoContext(c.Request.Context(), "wechat log-in refused", "request_id", requestIDOf(c), "errcode", out.ErrCode, "errmsg", out.ErrMsg)
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
