package auth

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// The hand-written HS256 check accepts exactly the tokens the jwt library accepted (HS256 only, exp
// required, no leeway), with the same claims, over tokens a client or an attacker could send:
// ours, other tools' (numbers for ids, fractional times, nbf), expired, not yet valid, re-signed
// with another key or algorithm, unsigned, truncated, re-encoded, spliced.
func TestHS256AcceptsWhatTheLibraryAccepts(t *testing.T) {
	secret := []byte("differential-secret-differential")
	other := []byte("another-secret-another-secret-00")
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	sign := func(m jwt.SigningMethod, key any, c jwt.MapClaims) string {
		tok, err := jwt.NewWithClaims(m, c).SignedString(key)
		require.NoError(t, err)
		return tok
	}
	exp, past := now.Add(time.Hour).Unix(), now.Add(-time.Second).Unix()
	base := func() jwt.MapClaims { return jwt.MapClaims{"sub": "alice", "role": "user", "exp": exp} }
	with := func(k string, v any) jwt.MapClaims { c := base(); c[k] = v; return c }
	without := func(k string) jwt.MapClaims { c := base(); delete(c, k); return c }
	good := sign(jwt.SigningMethodHS256, secret, base())
	parts := strings.Split(good, ".")
	b64 := base64.RawURLEncoding.EncodeToString

	tokens := map[string]string{
		"ours":               good,
		"staff, venue text":  sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "desk", "role": "staff", "venue_id": "7", "exp": exp}),
		"staff, venue num":   sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "desk", "role": "staff", "venue_id": 7, "exp": exp}),
		"fractional exp":     sign(jwt.SigningMethodHS256, secret, with("exp", float64(exp)+0.5)),
		"exp is now":         sign(jwt.SigningMethodHS256, secret, with("exp", now.Unix())),
		"expired":            sign(jwt.SigningMethodHS256, secret, with("exp", past)),
		"no exp":             sign(jwt.SigningMethodHS256, secret, without("exp")),
		"exp as text":        sign(jwt.SigningMethodHS256, secret, with("exp", "4102444800")),
		"nbf later":          sign(jwt.SigningMethodHS256, secret, with("nbf", now.Add(time.Minute).Unix())),
		"nbf now":            sign(jwt.SigningMethodHS256, secret, with("nbf", now.Unix())),
		"iat later":          sign(jwt.SigningMethodHS256, secret, with("iat", now.Add(time.Hour).Unix())),
		"other key":          sign(jwt.SigningMethodHS256, other, base()),
		"HS512":              sign(jwt.SigningMethodHS512, secret, base()),
		"HS384":              sign(jwt.SigningMethodHS384, secret, base()),
		"none":               sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, base()),
		"two parts":          parts[0] + "." + parts[1],
		"four parts":         good + ".x",
		"empty":              "",
		"dots":               "..",
		"padded signature":   good + "=",
		"std base64 sig":     parts[0] + "." + parts[1] + "." + strings.NewReplacer("-", "+", "_", "/").Replace(parts[2]),
		"short signature":    parts[0] + "." + parts[1] + "." + parts[2][:20],
		"spliced payload":    parts[0] + "." + b64([]byte(`{"sub":"mallory","role":"admin","exp":4102444800}`)) + "." + parts[2],
		"header not json":    resign(t, secret, b64([]byte(`not json`)), parts[1]),
		"header null":        resign(t, secret, b64([]byte(`null`)), parts[1]),
		"header alg missing": resign(t, secret, b64([]byte(`{"typ":"JWT"}`)), parts[1]),
		"header alg number":  resign(t, secret, b64([]byte(`{"alg":256}`)), parts[1]),
		"payload not json":   resign(t, secret, parts[0], b64([]byte(`[1,2`))),
		"payload array":      resign(t, secret, parts[0], b64([]byte(`[]`))),
		"payload bad b64":    resign(t, secret, parts[0], "%%%"),
		"sub number":         sign(jwt.SigningMethodHS256, secret, with("sub", 12)),
	}
	fast := newHS256(secret)
	for name, tok := range tokens {
		var lib claims
		_, libErr := jwt.ParseWithClaims(tok, &lib, func(*jwt.Token) (any, error) { return secret, nil },
			jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired(), jwt.WithTimeFunc(func() time.Time { return now }))
		got, err := fast.verify(tok, now)
		require.Equalf(t, libErr == nil, err == nil, "%s: library says %v, hs256 says %v", name, libErr, err)
		if err == nil {
			require.Equalf(t, lib, got, "%s: the claims differ", name)
		}
	}
	require.NoError(t, func() error { _, err := fast.verify(good, now); return err }(), "a token verifies again with a pooled MAC")
}

// resign signs header.payload with secret as HS256 would, so that only the segment under test is odd.
func resign(t *testing.T, secret []byte, header, payload string) string {
	t.Helper()
	sig, err := jwt.SigningMethodHS256.Sign(header+"."+payload, secret)
	require.NoError(t, err)
	return header + "." + payload + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// BenchmarkVerifyToken: a token's verification by the jwt library and by hs256, in the same run.
func BenchmarkVerifyToken(b *testing.B) {
	secret := []byte("bench-secret-bench-secret-bench-")
	now := time.Now()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "role": "user", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}).SignedString(secret)
	require.NoError(b, err)
	b.Run("library", func(b *testing.B) {
		for b.Loop() {
			var c claims
			if _, err := jwt.ParseWithClaims(tok, &c, func(*jwt.Token) (any, error) { return secret, nil },
				jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hs256", func(b *testing.B) {
		h := newHS256(secret)
		for b.Loop() {
			if _, err := h.verify(tok, now); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// claimPayloads are token payloads that plainClaims reads, and ones it must leave to encoding/json.
var claimPayloads = []string{
	`{"role":"user","sub":"bench-1","exp":1780000000,"iat":1779913600}`,
	`{"exp":1780000000,"role":"staff","sub":"desk","venue_id":"7"}`,
	` {"role":"staff","venue_id":7,"sub":"d","iss":"x","jti":"j","nbf":0,"exp":999999999999999} `,
	`{}`, `{"venue_id":""}`, `{"venue_id":"null"}`, `{"venue_id":null}`, `{"venue_id":"x"}`, `{"venue_id":-1}`,
	`{"venue_id":07}`, `{"venue_id":7.0}`, `{"venue_id":"18446744073709551616"}`, `{"venue_id":18446744073709551615}`,
	`{"exp":1780000000.5}`, `{"exp":1e9}`, `{"exp":-1}`, `{"exp":01}`, `{"exp":"1780000000"}`, `{"exp":1000000000000000}`,
	`{"exp":null}`, `{"sub":12}`, `{"sub":"a\"b"}`, `{"sub":"é"}`, `{"Sub":"x"}`, `{"aud":"x"}`, `{"aud":["a","b"]}`,
	`{"other":1}`, `{"sub":"a","sub":"b"}`, `{"exp":1,"exp":2}`, `{"role":"user",}`, `{"role":"user"} x`, `[]`, `null`,
	`{"role":"user"`, `{"role"}`, ``, "{\"sub\":\"a\x01\"}",
}

func TestPlainClaimsIsUnmarshal(t *testing.T) {
	read := 0
	for _, p := range claimPayloads {
		if checkPlainClaims(t, []byte(p)) {
			read++
		}
	}
	require.Equal(t, 7, read, "the payloads plainClaims reads by hand")
}

// FuzzPlainClaims holds plainClaims to json.Unmarshal.
func FuzzPlainClaims(f *testing.F) {
	for _, p := range claimPayloads {
		f.Add([]byte(p))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkPlainClaims(t, b) })
}

// checkPlainClaims fails unless plainClaims, when it reads b, reads what json.Unmarshal does; it
// answers whether plainClaims read b.
func checkPlainClaims(t *testing.T, b []byte) bool {
	t.Helper()
	var got claims
	if !plainClaims(b, &got) {
		return false
	}
	var want claims
	require.NoError(t, json.Unmarshal(b, &want), "%q is read by hand but refused by encoding/json", b)
	require.Equal(t, want, got, "%q", b)
	return true
}

// headerHS256 is the header our tokens carry, and says what verify takes it to say.
func TestHeaderHS256(t *testing.T) {
	require.Equal(t, base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)), headerHS256)
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "a"}).SignedString([]byte("k"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(tok, headerHS256+"."), "the library writes another header: %s", tok)
}
