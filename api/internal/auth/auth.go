// Package auth owns who a request comes from: the HS256 Bearer tokens the API issues and verifies
// (with a cache of those already verified), the role check of each route, the dashboard's guard,
// and the actor a handler acts for. It answers failures through package answer and must never
// import the api package or the engine's services.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"

	"github.com/slotwheel/slotwheel/api/internal/answer"
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

// TTL is how long a token issued by the log-in routes lasts.
const TTL = 24 * time.Hour

// Tokens issues and verifies the API's Bearer tokens, and guards routes with them.
type Tokens struct {
	secret []byte
	now    func() time.Time
	out    answer.Failer
	cache  tokenCache
	hs256  *hs256
}

// NewTokens signs and verifies tokens with the HS256 secret, at the times now answers; out answers
// the requests a guard refuses.
func NewTokens(secret []byte, now func() time.Time, out answer.Failer) *Tokens {
	return &Tokens{secret: secret, now: now, out: out, hs256: newHS256(secret)}
}

// Issue signs a token for actor a that lasts TTL, and answers when it expires.
func (s *Tokens) Issue(a booking.Actor) (string, time.Time, error) { return s.IssueFor(a, TTL) }

// IssueFor signs a token for actor a that lasts ttl, and answers when it expires.
func (s *Tokens) IssueFor(a booking.Actor, ttl time.Duration) (string, time.Time, error) {
	now := s.now()
	exp := now.Add(ttl)
	c := claims{
		Role:    a.Role,
		VenueID: claimID(a.VenueID),
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   a.UserID,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(exp),
		},
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(s.secret)
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

// Parse verifies a compact HS256 token and returns its actor.
func (s *Tokens) Parse(tok string) (booking.Actor, error) {
	if a, ok := s.cache.get(tok, s.now()); ok {
		return a, nil
	}
	a, exp, err := s.verifyToken(tok)
	if err != nil {
		return booking.Actor{}, err
	}
	s.cache.put(tok, a, exp)
	return a, nil
}

func (s *Tokens) verifyToken(tok string) (booking.Actor, time.Time, error) {
	c, err := s.hs256.verify(tok, s.now())
	if err != nil {
		return booking.Actor{}, time.Time{}, err
	}
	if !ValidUserID(c.Subject) {
		return booking.Actor{}, time.Time{}, errors.New("token has no valid sub")
	}
	a := booking.Actor{UserID: c.Subject, Role: c.Role}
	switch {
	case !slices.Contains(booking.Roles(), c.Role):
		return booking.Actor{}, time.Time{}, fmt.Errorf("token has unknown role %q", c.Role)
	case booking.VenueRole(c.Role):
		if c.VenueID == 0 {
			return booking.Actor{}, time.Time{}, fmt.Errorf("%s token without venue_id", c.Role)
		}
		a.VenueID = uint64(c.VenueID)
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

// Require requires a valid Bearer token whose role is one of roles, and keeps its actor for Actor.
func (s *Tokens) Require(roles ...string) gin.HandlerFunc {
	return func(c *gin.Context) {
		tok, ok := bearer(c.GetHeader("Authorization"))
		if !ok {
			c.Header("WWW-Authenticate", `Bearer realm="slotwheel"`)
			s.out.Fail(c, answer.ErrUnauthorized)
			return
		}
		a, err := s.Parse(tok)
		if err != nil {
			c.Header("WWW-Authenticate", `Bearer realm="slotwheel", error="invalid_token"`)
			s.out.Fail(c, answer.ErrUnauthorized)
			return
		}
		allowed := false
		for _, r := range roles {
			allowed = allowed || a.Role == r
		}
		if !allowed {
			s.out.Fail(c, answer.ErrForbidden)
			return
		}
		c.Set(ctxActor, a)
		c.Next()
	}
}

const ctxActor = "slotwheel.actor"

// Actor is the caller Require let in; the zero Actor on routes without a token.
func Actor(c *gin.Context) booking.Actor {
	v, _ := c.Get(ctxActor)
	a, _ := v.(booking.Actor)
	return a
}

// Caller names the caller in idempotency scopes.
func Caller(c *gin.Context) string {
	if a := Actor(c); a.UserID != "" {
		return a.UserID
	}
	return "anon"
}

// ValidUserID accepts 1..128 characters of letters, digits and "-_.:@", except an erased user's
// pseudonym: nobody may sign in or act as one.
func ValidUserID(s string) bool {
	return answer.SaneToken(strings.ReplaceAll(s, "@", "_"), 128) && !booking.IsPseudonym(s)
}

// Dashboard lets in an admin Bearer token, or HTTP Basic with the dashboard's credentials
// wantUserName and wantPassword (never when that is empty), so that a person can open the dashboard
// in a browser.
func (s *Tokens) Dashboard(wantUserName, wantPassword string) gin.HandlerFunc {
	wantUser := sha256.Sum256([]byte(wantUserName))
	wantPass := sha256.Sum256([]byte(wantPassword))
	basicOn := wantPassword != ""
	return func(c *gin.Context) {
		if tok, ok := bearer(c.GetHeader("Authorization")); ok {
			a, err := s.Parse(tok)
			switch {
			case err != nil:
			case a.Role == booking.RoleAdmin:
				c.Next()
				return
			default:
				s.out.Fail(c, answer.ErrForbidden)
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
		s.out.Fail(c, answer.ErrUnauthorized)
	}
}
