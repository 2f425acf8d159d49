package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
)

// notify sends a payment notification signed at signedAt with secret.
func (hs *harness) notify(body []byte, secret []byte, signedAt time.Time) reply {
	hs.t.Helper()
	return hs.do(http.MethodPost, "/api/v1/payments/notify", "", body,
		header{headerSignature, Sign(secret, body, signedAt)})
}

func paymentBody(t *testing.T, holdID, paymentID string, amount int64, paidAt time.Time) []byte {
	t.Helper()
	b, err := json.Marshal(set{"hold_id": holdID, "payment_id": paymentID, "amount_cents": amount, "paid_at": paidAt.Format(time.RFC3339)})
	require.NoError(t, err)
	return b
}

func TestPaymentSignature(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	h := hs.hold(alice, 1, 10)
	now := hs.clock.Now()
	body := paymentBody(t, h.HoldID, "pay-1", h.AmountCents, now)

	for name, tc := range map[string]struct {
		header string
		code   string
	}{
		"no header":        {"", "bad_signature"},
		"garbage":          {"garbage", "bad_signature"},
		"no v1":            {"t=" + itoa(now.Unix()), "bad_signature"},
		"no t":             {"v1=" + strings.Repeat("ab", 32), "bad_signature"},
		"wrong secret":     {Sign([]byte("not-the-secret"), body, now), "bad_signature"},
		"other body":       {Sign(testPaymentSecret, append([]byte(" "), body...), now), "bad_signature"},
		"t changed":        {strings.Replace(Sign(testPaymentSecret, body, now), "t="+itoa(now.Unix()), "t="+itoa(now.Unix()+1), 1), "bad_signature"},
		"stale":            {Sign(testPaymentSecret, body, now.Add(-5*time.Minute-time.Second)), "stale_signature"},
		"from the future":  {Sign(testPaymentSecret, body, now.Add(5*time.Minute+time.Second)), "stale_signature"},
		"hex not hex":      {"t=" + itoa(now.Unix()) + ",v1=zz", "bad_signature"},
		"signature of nil": {Sign(testPaymentSecret, nil, now), "bad_signature"},
	} {
		var headers []header
		if tc.header != "" {
			headers = append(headers, header{headerSignature, tc.header})
		}
		r := hs.do(http.MethodPost, "/api/v1/payments/notify", "", body, headers...)
		require.Equal(t, http.StatusUnauthorized, r.Status, "%s: %s", name, r.Body)
		require.Equal(t, tc.code, r.errorCode(), name)
	}

	// Nothing was booked; a correct signature (one of several v1 entries, as during a secret rotation,
	// and within the 5 minutes) books.
	var bookings listResponse[bookingResponse]
	hs.do(http.MethodGet, "/api/v1/bookings", alice, nil).expect(t, http.StatusOK).decode(t, &bookings)
	require.Empty(t, bookings.Items)
	signedAt := now.Add(-4 * time.Minute)
	good := Sign(testPaymentSecret, body, signedAt)
	rotated := good + ",v1=" + strings.Repeat("00", 32)
	var res paymentResponse
	hs.do(http.MethodPost, "/api/v1/payments/notify", "", body, header{headerSignature, rotated}).
		expect(t, http.StatusOK).decode(t, &res)
	require.Equal(t, engine.OutcomeBooked, res.Outcome)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestPaymentIsDeduplicated: the same notification twice makes one booking and gets an identical
// answer; another payment for the paid hold is a refund.
func TestPaymentIsDeduplicated(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	h := hs.hold(alice, 1, 10)
	body := paymentBody(t, h.HoldID, "pay-dup", h.AmountCents, hs.clock.Now())
	sent := hs.clock.Now()

	first := hs.notify(body, testPaymentSecret, sent).expect(t, http.StatusOK)
	var res paymentResponse
	first.decode(t, &res)
	require.Equal(t, engine.OutcomeBooked, res.Outcome)
	require.Equal(t, "pay-dup", res.PaymentID)
	require.Equal(t, h.HoldID, res.HoldID)
	require.NotNil(t, res.Booking)
	require.Equal(t, "CONFIRMED", res.Booking.Status)
	require.Equal(t, "pay-dup", res.Booking.PaymentID)
	require.Equal(t, h.AmountCents, res.Booking.AmountCents)

	hs.clock.Advance(30 * time.Second)
	second := hs.notify(body, testPaymentSecret, hs.clock.Now()).expect(t, http.StatusOK)
	require.JSONEq(t, string(first.Body), string(second.Body))
	// The very same request again, signature and all (the provider's retry of a lost answer).
	third := hs.notify(body, testPaymentSecret, sent).expect(t, http.StatusOK)
	require.JSONEq(t, string(first.Body), string(third.Body))

	var bookings listResponse[bookingResponse]
	hs.do(http.MethodGet, "/api/v1/bookings", alice, nil).expect(t, http.StatusOK).decode(t, &bookings)
	require.Len(t, bookings.Items, 1)

	// A second payment for the same hold is recorded for refund, and answered so again.
	other := paymentBody(t, h.HoldID, "pay-other", h.AmountCents, hs.clock.Now())
	var refund paymentResponse
	r1 := hs.notify(other, testPaymentSecret, hs.clock.Now()).expect(t, http.StatusOK)
	r1.decode(t, &refund)
	require.Equal(t, engine.OutcomeRefund, refund.Outcome)
	require.Nil(t, refund.Booking)
	r2 := hs.notify(other, testPaymentSecret, hs.clock.Now()).expect(t, http.StatusOK)
	require.JSONEq(t, string(r1.Body), string(r2.Body))
	hs.do(http.MethodGet, "/api/v1/bookings", alice, nil).expect(t, http.StatusOK).decode(t, &bookings)
	require.Len(t, bookings.Items, 1)

	// The wrong amount is refused and books nothing.
	h2 := hs.hold(alice, 1, 12)
	r := hs.notify(paymentBody(t, h2.HoldID, "pay-short", h2.AmountCents-1, hs.clock.Now()), testPaymentSecret, hs.clock.Now()).
		expect(t, http.StatusUnprocessableEntity)
	require.Equal(t, "amount_mismatch", r.errorCode())
}

// TestPaymentAfterExpiry: a payment for an expired hold re-takes its units when they are free, and is
// a refund (still 200) when someone else took them.
func TestPaymentAfterExpiry(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	single := hs.newResource(1)
	alice := hs.token("alice", booking.RoleUser, 0)
	start, end := hs.slot(1, 10)
	start2, end2 := hs.slot(1, 11)

	var lost, kept holdResponse
	hs.do(http.MethodPost, "/api/v1/holds", alice, set{"resource_id": single, "start": start, "end": end}).
		expect(t, http.StatusCreated).decode(t, &lost)
	hs.do(http.MethodPost, "/api/v1/holds", alice, set{"resource_id": single, "start": start2, "end": end2}).
		expect(t, http.StatusCreated).decode(t, &kept)

	hs.clock.Advance(11 * time.Minute) // both holds expire
	bob := hs.token("bob", booking.RoleUser, 0)
	hs.do(http.MethodPost, "/api/v1/holds", bob, set{"resource_id": single, "start": start, "end": end}).
		expect(t, http.StatusCreated)

	var res paymentResponse
	hs.notify(paymentBody(t, lost.HoldID, "pay-late", lost.AmountCents, hs.clock.Now()), testPaymentSecret, hs.clock.Now()).
		expect(t, http.StatusOK).decode(t, &res)
	require.Equal(t, engine.OutcomeRefund, res.Outcome)
	require.Nil(t, res.Booking)

	hs.notify(paymentBody(t, kept.HoldID, "pay-late-2", kept.AmountCents, hs.clock.Now()), testPaymentSecret, hs.clock.Now()).
		expect(t, http.StatusOK).decode(t, &res)
	require.Equal(t, engine.OutcomeBooked, res.Outcome)
	require.NotNil(t, res.Booking)
}

// TestPaymentConcurrentDuplicates: a provider that sends one notification several times at once gets
// one booking, and every copy is answered 200 with the same body as the first (a copy that arrives
// while the first is committing waits for it).
func TestPaymentConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	h := hs.hold(alice, 1, 10)
	body := paymentBody(t, h.HoldID, "pay-burst", h.AmountCents, hs.clock.Now())

	const n = 10
	out := make([]reply, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			out[i] = hs.notify(body, testPaymentSecret, hs.clock.Now())
		}()
	}
	close(gate)
	wg.Wait()

	var first string
	for _, r := range out {
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		if first == "" {
			first = string(r.Body)
		}
		require.JSONEq(t, first, string(r.Body))
	}
	require.NotEmpty(t, first)
	// The provider's retry is answered as the first time.
	again := hs.notify(body, testPaymentSecret, hs.clock.Now()).expect(t, http.StatusOK)
	require.JSONEq(t, first, string(again.Body))
	var bookings listResponse[bookingResponse]
	hs.do(http.MethodGet, "/api/v1/bookings", alice, nil).expect(t, http.StatusOK).decode(t, &bookings)
	require.Len(t, bookings.Items, 1)
}
