package webhook_test

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/notify/webhook"
)

// The vector of the Standard Webhooks reference libraries (libraries/go/webhook_test.go,
// TestWebhookSign, v1.3.0); the same secret, id and payload appear in every language's tests.
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specUnix      = 1614265330
	specPayload   = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func headers(id string, ts time.Time, sig string) http.Header {
	h := http.Header{}
	h.Set(webhook.HeaderID, id)
	h.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(webhook.HeaderSignature, sig)
	return h
}

func TestSpecVector(t *testing.T) {
	t.Parallel()
	ts := time.Unix(specUnix, 0)
	sig, err := webhook.Sign(specSecret, specID, ts, []byte(specPayload))
	require.NoError(t, err)
	require.Equal(t, specSignature, sig)
	require.NoError(t, webhook.Verify(specSecret, headers(specID, ts, specSignature), []byte(specPayload), ts, 0))
}

func TestNewSecret(t *testing.T) {
	t.Parallel()
	a, b := webhook.NewSecret(), webhook.NewSecret()
	require.NotEqual(t, a, b)
	require.True(t, strings.HasPrefix(a, "whsec_"), a)
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "whsec_"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(key), 24)
	require.LessOrEqual(t, len(key), 32)
}

func TestSignVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	secret := webhook.NewSecret()
	now := time.Unix(1_750_000_000, 0)
	body := []byte(`{"type":"booking.confirmed","data":{"name":"张三 🚀"}}`)
	sig, err := webhook.Sign(secret, "evt_123", now, body)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(sig, "v1,"), sig)
	require.NoError(t, webhook.Verify(secret, headers("evt_123", now, sig), body, now, time.Minute))

	// Without the prefix the secret is the same key, as in the reference libraries.
	require.NoError(t, webhook.Verify(strings.TrimPrefix(secret, "whsec_"), headers("evt_123", now, sig), body, now, time.Minute))
}

func TestVerifyRejects(t *testing.T) {
	t.Parallel()
	secret := webhook.NewSecret()
	now := time.Unix(1_750_000_000, 0)
	body := []byte(`{"id":"evt_1"}`)
	sig, err := webhook.Sign(secret, "evt_1", now, body)
	require.NoError(t, err)
	other := webhook.NewSecret()
	otherSig, err := webhook.Sign(other, "evt_1", now, body)
	require.NoError(t, err)

	for _, tc := range []struct {
		name   string
		secret string
		h      http.Header
		body   string
		now    time.Time
		want   error
	}{
		{"tampered body", secret, headers("evt_1", now, sig), `{"id":"evt_2"}`, now, webhook.ErrBadSignature},
		{"tampered id", secret, headers("evt_2", now, sig), string(body), now, webhook.ErrBadSignature},
		{"tampered timestamp", secret, headers("evt_1", now.Add(time.Second), sig), string(body), now, webhook.ErrBadSignature},
		{"other secret", secret, headers("evt_1", now, otherSig), string(body), now, webhook.ErrBadSignature},
		{"unknown version only", secret, headers("evt_1", now, strings.Replace(sig, "v1,", "v2,", 1)), string(body), now, webhook.ErrBadSignature},
		{"empty v1", secret, headers("evt_1", now, "v1,"), string(body), now, webhook.ErrBadSignature},
		{"stale", secret, headers("evt_1", now, sig), string(body), now.Add(6 * time.Minute), webhook.ErrStale},
		{"future", secret, headers("evt_1", now, sig), string(body), now.Add(-6 * time.Minute), webhook.ErrStale},
		{"no id", secret, headers("", now, sig), string(body), now, webhook.ErrMissingHeaders},
		{"no signature", secret, headers("evt_1", now, ""), string(body), now, webhook.ErrMissingHeaders},
		{"no headers", secret, http.Header{}, string(body), now, webhook.ErrMissingHeaders},
		{"bad secret", "whsec_not*base64", headers("evt_1", now, sig), string(body), now, webhook.ErrBadSecret},
		{"empty secret", "whsec_", headers("evt_1", now, sig), string(body), now, webhook.ErrBadSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := webhook.Verify(tc.secret, tc.h, []byte(tc.body), tc.now, 5*time.Minute)
			require.ErrorIs(t, err, tc.want)
		})
	}

	t.Run("timestamp not a number", func(t *testing.T) {
		t.Parallel()
		h := headers("evt_1", now, sig)
		h.Set(webhook.HeaderTimestamp, "2025-06-15T00:00:00Z")
		require.ErrorIs(t, webhook.Verify(secret, h, body, now, time.Minute), webhook.ErrMissingHeaders)
	})
	t.Run("extreme timestamp", func(t *testing.T) {
		t.Parallel()
		h := headers("evt_1", now, sig)
		h.Set(webhook.HeaderTimestamp, "-9223372036854775808")
		require.ErrorIs(t, webhook.Verify(secret, h, body, now, time.Minute), webhook.ErrStale)
	})
	t.Run("zero tolerance means the default, not unlimited", func(t *testing.T) {
		t.Parallel()
		require.NoError(t, webhook.Verify(secret, headers("evt_1", now, sig), body, now.Add(4*time.Minute), 0))
		require.ErrorIs(t, webhook.Verify(secret, headers("evt_1", now, sig), body, now.Add(time.Hour), 0), webhook.ErrStale)
	})
	t.Run("within tolerance", func(t *testing.T) {
		t.Parallel()
		require.NoError(t, webhook.Verify(secret, headers("evt_1", now, sig), body, now.Add(5*time.Minute), 5*time.Minute))
		require.NoError(t, webhook.Verify(secret, headers("evt_1", now, sig), body, now.Add(-5*time.Minute), 5*time.Minute))
	})
}

func TestVerifyAcceptsAnyOfSeveralSignatures(t *testing.T) {
	t.Parallel()
	oldSecret, newSecret := webhook.NewSecret(), webhook.NewSecret()
	now := time.Unix(1_750_000_000, 0)
	body := []byte(`{}`)
	oldSig, err := webhook.Sign(oldSecret, "evt_9", now, body)
	require.NoError(t, err)
	newSig, err := webhook.Sign(newSecret, "evt_9", now, body)
	require.NoError(t, err)
	// During secret rotation both signatures travel; junk entries are skipped, not fatal.
	h := headers("evt_9", now, "v1a,abc ,,, v1,not-base64 "+oldSig+" "+newSig)
	require.NoError(t, webhook.Verify(oldSecret, h, body, now, time.Minute))
	require.NoError(t, webhook.Verify(newSecret, h, body, now, time.Minute))
	require.ErrorIs(t, webhook.Verify(webhook.NewSecret(), h, body, now, time.Minute), webhook.ErrBadSignature)
}

func TestSignRejects(t *testing.T) {
	t.Parallel()
	now := time.Now()
	_, err := webhook.Sign("whsec_%%%", "evt_1", now, nil)
	require.ErrorIs(t, err, webhook.ErrBadSecret)
	_, err = webhook.Sign(webhook.NewSecret(), "", now, nil)
	require.ErrorIs(t, err, webhook.ErrMissingHeaders)
	_, err = webhook.Sign(webhook.NewSecret(), "evt 1\r\n", now, nil)
	require.ErrorIs(t, err, webhook.ErrMissingHeaders)
}

// TestCrossCheckReferenceLibrary checks our signatures against the official Go verifier, and
// theirs against ours, so that a receiver using any Standard Webhooks library accepts our events.
func TestCrossCheckReferenceLibrary(t *testing.T) {
	t.Parallel()
	for i := 0; i < 20; i++ {
		secret := webhook.NewSecret()
		now := time.Now()
		body := []byte(`{"n":` + strconv.Itoa(i) + `,"s":"预约已确认"}`)
		id := "evt_" + strconv.Itoa(i)

		ref, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)

		ours, err := webhook.Sign(secret, id, now, body)
		require.NoError(t, err)
		require.NoError(t, ref.Verify(body, headers(id, now, ours)))

		theirs, err := ref.Sign(id, now, body)
		require.NoError(t, err)
		require.Equal(t, theirs, ours)
		require.NoError(t, webhook.Verify(secret, headers(id, now, theirs), body, now, 0))

		require.Error(t, ref.Verify(append(body, ' '), headers(id, now, ours)))
	}
}
