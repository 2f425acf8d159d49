package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"hash"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/slotwheel/slotwheel/api/internal/request"
)

// hs256 verifies the compact HS256 tokens that a mini-program sends with every request. It accepts
// exactly what jwt.ParseWithClaims accepted with HS256 as the only method, exp required and no
// leeway (hs256_test's differential test holds it to that), at a fraction of the cost: in the
// booking-opening rush every client comes with a token of its own, so the verified-token cache
// never hits, and the library's verification — the header decoded into a map, the claims through
// a json.Decoder, a new HMAC keyed for every token — was a ninth of a hold's CPU.
type hs256 struct {
	macs sync.Pool // of hash.Hash: HMAC-SHA256 keyed with the secret, Reset to its keyed state
}

func newHS256(secret []byte) *hs256 {
	key := append([]byte(nil), secret...)
	return &hs256{macs: sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

// Errors of verify; their text reaches only the log, the client gets 401.
var (
	errTokenMalformed = errors.New("token is malformed")
	errTokenSignature = errors.New("token signature is invalid")
	errTokenAlg       = errors.New("token is not signed with HS256")
	errTokenExpired   = errors.New("token has expired or has no exp")
	errTokenNotYet    = errors.New("token is not valid yet")
)

// verify checks tok's signature, algorithm and validity window at now, and answers its claims.
func (h *hs256) verify(tok string, now time.Time) (claims, error) {
	var c claims
	head, rest, ok := strings.Cut(tok, ".")
	payload, sig, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || strings.IndexByte(sig, '.') >= 0 {
		return c, errTokenMalformed
	}
	if base64.RawURLEncoding.DecodedLen(len(sig)) != sha256.Size {
		return c, errTokenSignature
	}
	var got [sha256.Size]byte
	if _, err := base64.RawURLEncoding.Decode(got[:], []byte(sig)); err != nil {
		return c, errTokenSignature
	}
	mac := h.macs.Get().(hash.Hash)
	mac.Reset()
	mac.Write([]byte(tok[:len(head)+1+len(payload)]))
	var want [sha256.Size]byte
	valid := hmac.Equal(mac.Sum(want[:0]), got[:])
	h.macs.Put(mac)
	if !valid {
		return c, errTokenSignature
	}
	if head != headerHS256 { // any other header is read; this one, every token's, says HS256
		var hdr struct {
			Alg string `json:"alg"`
		}
		if err := decodeSegment(head, &hdr); err != nil {
			return c, err
		}
		if hdr.Alg != "HS256" {
			return c, errTokenAlg
		}
	}
	if err := decodeClaims(payload, &c); err != nil {
		return c, err
	}
	if c.ExpiresAt == nil || !now.Before(c.ExpiresAt.Time) {
		return c, errTokenExpired
	}
	if c.NotBefore != nil && now.Before(c.NotBefore.Time) {
		return c, errTokenNotYet
	}
	return c, nil
}

// headerHS256 is the header of the tokens slotwheel and the jwt library write,
// {"alg":"HS256","typ":"JWT"}.
const headerHS256 = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"

// decodeClaims decodes a token's payload segment into c: by hand when it holds only claims that
// plainClaims reads, else through encoding/json.
func decodeClaims(seg string, c *claims) error {
	var buf [512]byte
	if base64.RawURLEncoding.DecodedLen(len(seg)) > len(buf) {
		return decodeSegment(seg, c)
	}
	n, err := base64.RawURLEncoding.Decode(buf[:], []byte(seg))
	if err != nil {
		return errTokenMalformed
	}
	if plainClaims(buf[:n], c) {
		return nil
	}
	*c = claims{}
	if err := json.Unmarshal(buf[:n], c); err != nil {
		return errTokenMalformed
	}
	return nil
}

// plainClaims reads b into c when it is a JSON object of the claims a token of ours carries (role,
// sub, iss, jti as plain strings; exp, nbf, iat as integers of at most 15 digits; venue_id), each
// once, and answers false when it is not sure — encoding/json decides then (c is left half
// written). What it reads is what json.Unmarshal reads (hs256_test holds it to that).
func plainClaims(b []byte, c *claims) bool {
	var seen [8]bool
	return request.PlainObject(b, func(key string, i int) (int, bool) {
		var k, j int
		switch key {
		case "role", "sub", "iss", "jti":
			s, end, ok := request.PlainString(b, i)
			if !ok {
				return 0, false
			}
			switch key {
			case "role":
				k, c.Role = 0, s
			case "sub":
				k, c.Subject = 1, s
			case "iss":
				k, c.Issuer = 2, s
			default:
				k, c.ID = 3, s
			}
			j = end
		case "exp", "nbf", "iat":
			n, end, ok := request.PlainUint(b, i, 15)
			if !ok {
				return 0, false
			}
			// What NumericDate.UnmarshalJSON makes of a whole number of seconds.
			d := jwt.NewNumericDate(time.Unix(int64(n), 0))
			switch key {
			case "exp":
				k, c.ExpiresAt = 4, d
			case "nbf":
				k, c.NotBefore = 5, d
			default:
				k, c.IssuedAt = 6, d
			}
			j = end
		case "venue_id":
			if s, end, ok := request.PlainString(b, i); ok && len(s) <= 20 {
				j = end
			} else if _, end, ok := request.PlainUint(b, i, 20); ok {
				j = end
			} else {
				return 0, false
			}
			if c.VenueID.UnmarshalJSON(b[i:j]) != nil {
				return 0, false
			}
			k = 7
		default:
			return 0, false
		}
		if seen[k] {
			return 0, false
		}
		seen[k] = true
		return j, true
	})
}

// decodeSegment decodes one base64url JSON segment of a token into v.
func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return errTokenMalformed
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errTokenMalformed
	}
	return nil
}
