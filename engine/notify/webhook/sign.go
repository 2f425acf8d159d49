// Package webhook owns slotwheel's outgoing webhooks on the wire: Standard Webhooks signatures
// (https://www.standardwebhooks.com), validation of endpoint URLs, and one HTTP delivery attempt with
// its outcome. Scheduling, retries and persistence of deliveries belong to the caller.
//
// It imports only the standard library and must import no other slotwheel package, so that any
// layer (engine, jobs, api, tools) can use it without import cycles.
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of the Standard Webhooks contract (docs/API.md).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix marks an endpoint secret; the rest of the secret is the standard base64 of the key.
const SecretPrefix = "whsec_"

// DefaultTolerance is the clock skew Verify allows when given a tolerance of zero or less; it is the
// value the Standard Webhooks reference libraries use.
const DefaultTolerance = 5 * time.Minute

// secretBytes is the key length NewSecret draws: 32 bytes is the HMAC-SHA256 block-size sweet spot
// and inside the 24..64 bytes the specification recommends.
const secretBytes = 32

// Errors returned by Sign and Verify; test them with errors.Is.
var (
	// ErrBadSignature means no signature in the header matches the body under the secret.
	ErrBadSignature = errors.New("webhook: no matching signature")
	// ErrStale means the timestamp is further from now than the tolerance, in either direction;
	// rejecting it is what stops replays of captured deliveries.
	ErrStale = errors.New("webhook: timestamp outside tolerance")
	// ErrMissingHeaders means a webhook header is absent or malformed.
	ErrMissingHeaders = errors.New("webhook: missing or malformed webhook headers")
	// ErrBadSecret means the secret is not "whsec_" followed by non-empty standard base64.
	ErrBadSecret = errors.New("webhook: invalid secret")
)

// NewSecret returns a fresh endpoint secret, "whsec_" + base64 of 32 random bytes.
func NewSecret() string {
	b := make([]byte, secretBytes)
	// crypto/rand.Read never fails on supported platforms (it panics instead, since Go 1.24).
	_, _ = rand.Read(b)
	return SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// decodeSecret returns the HMAC key of a secret. The prefix is optional, as in the reference
// libraries, so that receivers who stored only the base64 part still verify.
func decodeSecret(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		return nil, fmt.Errorf("%w: not base64 after %q", ErrBadSecret, SecretPrefix)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: empty key", ErrBadSecret)
	}
	return key, nil
}

// mac computes the raw v1 signature: HMAC-SHA256(key, id + "." + unix seconds + "." + body).
func mac(key []byte, id string, unix int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(nil, unix, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Sign returns the webhook-signature header value "v1,<base64 signature>" of a delivery. The
// timestamp is truncated to whole seconds, as it travels in webhook-timestamp.
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := decodeSecret(secret)
	if err != nil {
		return "", err
	}
	if err := checkID(id); err != nil {
		return "", err
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, ts.Unix(), body)), nil
}

// checkID refuses ids that cannot travel in a header unchanged: a receiver would sign a different
// id than we did, and the delivery would fail verification for a reason nobody could see.
func checkID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty webhook id", ErrMissingHeaders)
	}
	for _, r := range id {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("%w: webhook id %q contains spaces or control characters", ErrMissingHeaders, id)
		}
	}
	return nil
}

// Verify checks a received delivery: the three headers are present, the timestamp is within
// tolerance of now (DefaultTolerance when tolerance <= 0, so a zero value never disables the replay
// check), and one of the space-separated "v1,<base64>" entries of webhook-signature matches. Entries
// of other versions or malformed entries are skipped, as the specification asks, so signatures can
// be rotated by sending old and new side by side.
func Verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	key, err := decodeSecret(secret)
	if err != nil {
		return err
	}
	id, tsRaw, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	var missing []string
	for _, p := range [...][2]string{{HeaderID, id}, {HeaderTimestamp, tsRaw}, {HeaderSignature, sigs}} {
		if p[1] == "" {
			missing = append(missing, p[0])
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s absent", ErrMissingHeaders, strings.Join(missing, ", "))
	}
	unix, err := strconv.ParseInt(tsRaw, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not unix seconds", ErrMissingHeaders, HeaderTimestamp, tsRaw)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	// Compare against bounds rather than subtracting: an extreme timestamp would overflow.
	nowUnix, limit := now.Unix(), int64(tolerance/time.Second)
	switch {
	case unix < nowUnix-limit:
		return fmt.Errorf("%w: timestamp %d is too old (now %d, tolerance %s)", ErrStale, unix, nowUnix, tolerance)
	case unix > nowUnix+limit:
		return fmt.Errorf("%w: timestamp %d is in the future (now %d, tolerance %s)", ErrStale, unix, nowUnix, tolerance)
	}
	want := mac(key, id, unix, body)
	for _, entry := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			continue
		}
		// hmac.Equal runs in constant time, so response timing leaks nothing about the expected MAC.
		if hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrBadSignature
}
