package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/notify/webhook"
	"github.com/slotwheel/slotwheel/engine/wire"
)

// hookReceiver is a webhook endpoint on a real clock: it verifies each request and keeps what it
// acknowledged; refuse decides, per request (counted from 1), to answer 503 instead.
type hookReceiver struct {
	srv    *httptest.Server
	secret string
	refuse func(n int) bool

	mu       sync.Mutex
	requests int
	acked    []string             // "webhook-id type"
	arrived  map[string]time.Time // webhook-id → when it was first acknowledged
	refused  time.Time            // when it last refused a request
	bad      int
}

func newHookReceiver(t testing.TB) *hookReceiver {
	r := &hookReceiver{arrived: map[string]time.Time{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.requests++
		if err := webhook.Verify(r.secret, req.Header, body, time.Now(), webhook.DefaultTolerance); err != nil {
			r.bad++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.refuse != nil && r.refuse(r.requests) {
			r.refused = time.Now()
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var ev struct{ Type string }
		_ = json.Unmarshal(body, &ev)
		id := req.Header.Get("webhook-id")
		r.acked = append(r.acked, id+" "+ev.Type)
		if _, seen := r.arrived[id]; !seen {
			r.arrived[id] = time.Now()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) snapshot() (acked []string, requests, bad int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.acked), r.requests, r.bad
}

// register creates the endpoint on b's engine and keeps its secret.
func (r *hookReceiver) register(t testing.TB, b *testBundle) {
	w, err := b.eng.CreateWebhook(context.Background(), booking.System, engine.WebhookInput{URL: r.srv.URL})
	require.NoError(t, err)
	r.secret = w.Secret
}

// Through the real queue: the relay publishes a booking's events, the worker delivers them signed
// and in order, and a refused attempt is retried by the queue within 10 s.
func TestDeliveriesThroughTheQueue(t *testing.T) {
	t.Parallel()
	b := setup(t, testConfig{engine: engine.Options{DefaultGrace: 2 * time.Second}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := newHookReceiver(t)
	r.refuse = func(n int) bool { return n == 1 }
	r.register(t, b)
	_, resourceID := b.venueWithHall(t, 10)
	require.NoError(t, b.jobs.Start(ctx))
	loops := b.eng.NewLoops(engine.LoopsConfig{})
	loops.Start(ctx)
	t.Cleanup(loops.Stop)

	bk, err := b.book(ctx, resourceID, "alice")
	require.NoError(t, err)
	refused := time.Now()
	waitFor(t, 30*time.Second, "the confirmation and the release to be delivered", func() (bool, error) {
		acked, _, _ := r.snapshot()
		return len(acked) == 2, nil
	})
	acked, requests, bad := r.snapshot()
	require.Zero(t, bad, "every request is signed")
	require.Equal(t, 3, requests, "one refusal, then one request per event")
	var types []string
	for _, a := range acked {
		var id, typ string
		_, err := fmt.Sscan(a, &id, &typ)
		require.NoError(t, err)
		types = append(types, typ)
	}
	require.Equal(t, []string{"booking.confirmed", "booking.released"}, types, "in order, each once")
	require.Less(t, time.Since(refused), 25*time.Second)
	r.mu.Lock()
	retried := r.arrived[strings.Fields(acked[0])[0]].Sub(r.refused)
	r.mu.Unlock()
	require.Less(t, retried, 10*time.Second, "docs/API.md: a refused delivery is retried within 10 s")
	got, err := b.eng.GetBooking(ctx, booking.System, bk.ID)
	require.NoError(t, err)
	require.Equal(t, "RELEASED", string(got.Status))
}

// BenchmarkDeliveryDelay releases 1,000 bookings due in the same second, with one webhook endpoint
// for every event, and measures the delay from each release (the transition, as its event's
// created_at in SQL records it) to the moment a local receiver acknowledged it, and the events
// delivered per second over the burst. Each iteration waits for its bookings' slot to start (up to a minute).
func BenchmarkDeliveryDelay(b *testing.B) {
	const n = 1000
	tb := setup(b, testConfig{engine: engine.Options{DefaultGrace: 2 * time.Second, HoldTTL: time.Hour}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := newHookReceiver(b)
	w, err := tb.eng.CreateWebhook(ctx, booking.System, engine.WebhookInput{URL: r.srv.URL, EventTypes: []string{"booking.released"}})
	require.NoError(b, err)
	r.secret = w.Secret
	_, resourceID := tb.venueWithHall(b, 2*n)
	require.NoError(b, tb.jobs.Start(ctx))
	loops := tb.eng.NewLoops(engine.LoopsConfig{Lease: tb.eng.Lease})
	loops.Start(ctx)
	b.Cleanup(loops.Stop)

	var delays []time.Duration
	var rates []float64
	for iter := 0; b.Loop(); iter++ {
		// A slot starting a minute or two ahead: every booking's release_at is its start + grace, one
		// instant, and creating them all takes less than that.
		start := tb.eng.Clock().Now().Truncate(time.Minute).Add(2 * time.Minute)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for w := range creators {
			wg.Go(func() {
				for i := w; i < n; i += creators {
					user := fmt.Sprintf("d%d-%d", iter, i)
					h, err := tb.eng.Hold(ctx, engine.HoldRequest{UserID: user, ResourceID: resourceID, Start: start, End: start.Add(time.Minute), Quantity: 1})
					if err == nil {
						_, err = tb.eng.Confirm(ctx, booking.Actor{UserID: user, Role: booking.RoleUser}, h.ID)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(b, err)
		}
		before, _, _ := r.snapshot()
		waitFor(b, 3*time.Minute, "the burst's events to be delivered", func() (bool, error) {
			acked, _, _ := r.snapshot()
			return len(acked)-len(before) >= n, nil
		})
		var rows []struct {
			ID uint64
			At time.Time
		}
		require.NoError(b, tb.db.Gorm.Raw(`SELECT id, created_at AS at FROM outbox_events
			WHERE type = 'booking.released' AND created_at >= ?`, start).Scan(&rows).Error)
		require.Len(b, rows, n)
		var lag struct{ Lo, Hi time.Time }
		require.NoError(b, tb.db.Gorm.Raw(`SELECT MIN(created_at) AS lo, MAX(created_at) AS hi FROM outbox_events
			WHERE type = 'booking.released' AND created_at >= ?`, start).Scan(&lag).Error)
		r.mu.Lock()
		b.Logf("releases recorded between %s and %s; first acknowledged %s after the first release",
			lag.Lo.Format("15:04:05.000"), lag.Hi.Format("15:04:05.000"), firstArrival(r.arrived).Sub(lag.Lo))
		first, last := rows[0].At, rows[0].At
		for _, row := range rows {
			got, ok := r.arrived[wire.EventID(row.ID)]
			require.True(b, ok, "event %d acknowledged", row.ID)
			delays = append(delays, got.Sub(row.At))
			first, last = minTime(first, row.At), maxTime(last, got)
		}
		r.mu.Unlock()
		rates = append(rates, float64(n)/last.Sub(first).Seconds())
	}
	slices.Sort(delays)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(delays[len(delays)/2]), "p50-ms")
	b.ReportMetric(ms(delays[len(delays)*99/100]), "p99-ms")
	b.ReportMetric(ms(delays[len(delays)-1]), "max-ms")
	b.ReportMetric(ms(delays[0]), "min-ms")
	slices.Sort(rates)
	b.ReportMetric(rates[len(rates)/2], "events/s")
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func firstArrival(m map[string]time.Time) time.Time {
	var first time.Time
	for _, t := range m {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first
}
