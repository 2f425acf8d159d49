package api

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/testenv/faultproxy"
)

// outageTimeout is the request timeout of the outage tests: short, so that a request waiting on a
// silent MySQL gives up quickly, and the bound every answer during the outage must meet.
const outageTimeout = 2 * time.Second

// During a MySQL outage — connections refused, or a server that accepts and never answers — holds
// keep selling, with and without an Idempotency-Key, from the catalog cached before it, and the
// availability of a loaded day keeps answering. What needs MySQL (a day never loaded, a confirm)
// answers 503 storage_unavailable with Retry-After within the request timeout, never a hang and
// never a 2xx without its row. Once MySQL is back the holds taken meanwhile are paid into bookings.
func TestHoldsThroughMySQLOutage(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"refused", "silent"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			var proxy *faultproxy.Proxy
			hs := newHarness(t, withSQLProxy(&proxy), withCapacity(10),
				withOptions(func(o *Options) { o.RequestTimeout = outageTimeout }))
			if proxy == nil {
				t.Skip("the embedded SQLite is in-process: there is no connection to lose")
			}
			alice := hs.token("alice", booking.RoleUser, 0)
			bob := hs.token("bob", booking.RoleUser, 0)
			date := func(days int) string { s, _ := hs.slot(days, 10); return s[:10] }

			// Before the outage: the day is loaded and the catalog cached, as on a live server.
			hs.do(http.MethodGet, "/api/v1/availability?resource_id="+hs.res+"&date="+date(1), "", nil).expect(t, http.StatusOK)
			before := hs.hold(alice, 1, 9)

			switch mode {
			case "refused":
				proxy.Refuse(true)
				proxy.CutAll()
			case "silent":
				proxy.Blackhole(true)
			}
			// Long enough for every cached entry to be stale: the cache must answer from SQL's absence.
			hs.clock.Advance(time.Minute)

			timed := func(what string, f func() reply) reply {
				t.Helper()
				began := time.Now()
				r := f()
				require.Less(t, time.Since(began), outageTimeout+time.Second, "%s answers within the request timeout", what)
				return r
			}
			var plain holdResponse
			timed("a hold", func() reply { return hs.holdReply(bob, 1, 11) }).expect(t, http.StatusCreated).decode(t, &plain)
			start, end := hs.slot(1, 12)
			body := set{"resource_id": hs.res, "start": start, "end": end}
			key := header{headerIdempotencyKey, "outage-1"}
			var keyed, again holdResponse
			timed("a hold with a key", func() reply { return hs.do(http.MethodPost, "/api/v1/holds", alice, body, key) }).
				expect(t, http.StatusCreated).decode(t, &keyed)
			r := hs.do(http.MethodPost, "/api/v1/holds", alice, body, key).expect(t, http.StatusCreated).decode(t, &again)
			require.Equal(t, keyed.HoldID, again.HoldID, "a repeat is answered from the key's record in Redis")
			require.Equal(t, "true", r.Header.Get(headerReplayed))

			var avail availabilityResponse
			timed("availability of a loaded day", func() reply {
				return hs.do(http.MethodGet, "/api/v1/availability?resource_id="+hs.res+"&date="+date(1), "", nil)
			}).expect(t, http.StatusOK).decode(t, &avail)
			held := 0
			for _, s := range avail.Slots {
				held += hs.resCap - s.Remaining
			}
			require.Equal(t, 3, held, "the three holds take their units")

			for what, f := range map[string]func() reply{
				"availability of a day never loaded": func() reply {
					return hs.do(http.MethodGet, "/api/v1/availability?resource_id="+hs.res+"&date="+date(3), "", nil)
				},
				"a confirm": func() reply {
					return hs.do(http.MethodPost, "/api/v1/holds/"+plain.HoldID+"/confirm", bob, nil)
				},
				"a payment": func() reply {
					return hs.notify(paymentBody(t, before.HoldID, "pay-outage", before.AmountCents, hs.clock.Now()),
						testPaymentSecret, hs.clock.Now())
				},
			} {
				r := timed(what, f).expect(t, http.StatusServiceUnavailable)
				require.Equal(t, "storage_unavailable", r.errorCode(), what)
				secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
				require.NoError(t, err, "%s: Retry-After", what)
				require.Positive(t, secs, what)
			}

			switch mode {
			case "refused":
				proxy.Refuse(false)
			case "silent":
				proxy.Blackhole(false)
			}
			// MySQL is back: every hold taken meanwhile, and the one the failed payment was for, is
			// paid into a booking.
			var b bookingResponse
			hs.do(http.MethodPost, "/api/v1/holds/"+plain.HoldID+"/confirm", bob, nil).expect(t, http.StatusCreated).decode(t, &b)
			require.Equal(t, "CONFIRMED", b.Status)
			hs.do(http.MethodPost, "/api/v1/holds/"+keyed.HoldID+"/confirm", alice, nil).expect(t, http.StatusCreated)
			hs.notify(paymentBody(t, before.HoldID, "pay-outage", before.AmountCents, hs.clock.Now()),
				testPaymentSecret, hs.clock.Now()).expect(t, http.StatusOK)
			var list listResponse[bookingResponse]
			hs.do(http.MethodGet, "/api/v1/bookings", alice, nil).expect(t, http.StatusOK).decode(t, &list)
			require.Len(t, list.Items, 2)
		})
	}
}

// holdReply asks for a hold on the harness's resource without checking the answer.
func (hs *harness) holdReply(user string, days, hour int) reply {
	start, end := hs.slot(days, hour)
	return hs.do(http.MethodPost, "/api/v1/holds", user, set{"resource_id": hs.res, "start": start, "end": end})
}

// An instance that has served no hold yet — it started, and guests only looked at a day — still
// holds through a MySQL outage: what every hold reads beyond its resource (the no-show rule, the
// grace policies) was loaded at start, and a cached entry is answered while SQL is down.
func TestFirstHoldThroughMySQLOutage(t *testing.T) {
	t.Parallel()
	var proxy *faultproxy.Proxy
	hs := newHarness(t, withSQLProxy(&proxy), withCapacity(10),
		withOptions(func(o *Options) { o.RequestTimeout = outageTimeout }))
	if proxy == nil {
		t.Skip("the embedded SQLite is in-process: there is no connection to lose")
	}
	_, err := hs.eng.ReconcileAtStart(t.Context(), hs.clock.Now()) // as the binary starts
	require.NoError(t, err)
	s, _ := hs.slot(1, 10)
	hs.do(http.MethodGet, "/api/v1/availability?resource_id="+hs.res+"&date="+s[:10], "", nil).expect(t, http.StatusOK)

	proxy.Blackhole(true)
	defer proxy.Blackhole(false)
	hs.clock.Advance(time.Minute)
	began := time.Now()
	hs.holdReply(hs.token("bob", booking.RoleUser, 0), 1, 11).expect(t, http.StatusCreated)
	require.Less(t, time.Since(began), outageTimeout+time.Second)
}
