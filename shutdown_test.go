package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/notify/webhook"
)

// SIGTERM while a stream of releases runs loses and duplicates nothing. The instance stops within
// 5 s; another one started on the same backends then finishes the job: every no-show is RELEASED,
// once (one CONFIRMED → RELEASED in its history, one booking.released event id — a redelivery
// keeps its id), never before its release_at, and every unit comes back.
func TestSIGTERMWhileReleasesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const n = 240
	env := append(backends(t), "SLOTWHEEL_DEV_LOGIN=true")
	sink := newReleaseSink(t)
	addr := freeAddr(t)
	first := startInstance(t, "all", append(env, "SLOTWHEEL_HTTP_ADDR="+addr)...)
	c := &client{t: t, base: "http://" + addr}
	c.waitReady()

	admin := c.token("ops", "admin", "")
	sink.secret = c.do("POST", "/api/v1/admin/webhooks", admin, map[string]any{"url": sink.srv.URL,
		"event_types": []string{"booking.released"}}, 201)["secret"].(string)
	// The hour in progress in the venue's zone, which must not end before the units are counted
	// back: near the end of a UTC hour the venue is in Asia/Kolkata, whose hours turn at half past.
	// A booking paid after its start is released grace after its payment, so paying at a steady pace
	// spreads the releases over a few seconds.
	zone := "Asia/Shanghai"
	if time.Now().UTC().Minute() >= 55 {
		zone = "Asia/Kolkata"
	}
	loc, err := time.LoadLocation(zone)
	require.NoError(t, err)
	venue := c.do("POST", "/api/v1/admin/venues", admin, map[string]any{"name": "Term Hall", "timezone": zone}, 201)
	rid := c.do("POST", "/api/v1/admin/resources", admin, map[string]any{"venue_id": venue["venue_id"], "name": "Hall",
		"kind": "hall", "capacity": n, "category": "sigterm", "price_cents": 100}, 201)["resource_id"].(string)
	c.do("PUT", "/api/v1/admin/resources/"+rid+"/schedule", admin, map[string]any{"slot_minutes": 60,
		"weekly": []map[string]any{{"weekdays": []int{1, 2, 3, 4, 5, 6, 7}, "open": "00:00", "close": "24:00"}}, "horizon_days": 2}, 200)
	c.do("PUT", "/api/v1/admin/policies/grace", admin, map[string]any{"category": "sigterm", "grace_seconds": 3}, 200)

	local := time.Now().In(loc)
	start := time.Date(local.Year(), local.Month(), local.Day(), local.Hour(), 0, 0, 0, loc)
	slot := map[string]any{"resource_id": rid, "start": start.Format(time.RFC3339), "end": start.Add(time.Hour).Format(time.RFC3339)}
	ids := make([]string, n)
	pace := time.NewTicker(10 * time.Millisecond)
	for i := range ids {
		<-pace.C
		h := c.do("POST", "/api/v1/holds", c.token("u"+strconv.Itoa(i), "user", ""), slot, 201)
		paid := c.pay(h["hold_id"].(string), int64(h["amount_cents"].(float64)), "pay-"+strconv.Itoa(i))
		ids[i] = paid["booking"].(map[string]any)["booking_id"].(string)
	}
	pace.Stop()

	released := func() int {
		n, cursor := 0, ""
		for {
			list := c.do("GET", "/api/v1/admin/bookings?limit=100&venue_id="+venue["venue_id"].(string)+"&status=RELEASED&cursor="+cursor, admin, nil, 200)
			n += len(list["items"].([]any))
			if cursor, _ = list["next_cursor"].(string); cursor == "" {
				return n
			}
		}
	}
	waitUntil(t, 30*time.Second, "the first release", func() bool { return released() > 0 })
	took, err := first.stop(t, syscall.SIGTERM)
	require.NoError(t, err, "a clean exit after SIGTERM")
	require.Less(t, took, 5*time.Second, "SIGTERM ends the instance within 5 s")

	addr = freeAddr(t)
	startInstance(t, "all", append(env, "SLOTWHEEL_HTTP_ADDR="+addr)...)
	c = &client{t: t, base: "http://" + addr}
	c.waitReady()
	atStop := released()
	require.Less(t, atStop, n, "some releases were still to come at SIGTERM (otherwise this tested nothing)")
	waitUntil(t, 60*time.Second, "every release", func() bool { return released() == n })

	for _, id := range ids {
		b := c.do("GET", "/api/v1/bookings/"+id, admin, nil, 200)
		releaseAt, _ := time.Parse(time.RFC3339Nano, b["release_at"].(string))
		releasedAt, _ := time.Parse(time.RFC3339Nano, b["released_at"].(string))
		require.False(t, releasedAt.Before(releaseAt), "booking %s released before its release_at", id)
		hist := c.do("GET", "/api/v1/bookings/"+id+"/history", admin, nil, 200)["items"].([]any)
		releases := 0
		for _, h := range hist {
			if h.(map[string]any)["to"] == "RELEASED" {
				releases++
			}
		}
		require.Equal(t, 1, releases, "booking %s: one release in its history", id)
	}
	waitUntil(t, 60*time.Second, "every booking.released event", func() bool { return sink.bookings() == n })
	for booking, eventIDs := range sink.ids() {
		require.Len(t, eventIDs, 1, "booking %s: one booking.released event, whatever was redelivered", booking)
	}
	// Every unit is back: the whole capacity can be held again.
	c.do("POST", "/api/v1/holds", c.token("after", "user", ""), map[string]any{"resource_id": rid, "quantity": n,
		"start": slot["start"], "end": slot["end"]}, 201)
}

// releaseSink is a webhook receiver that verifies signatures and keeps, per booking, the distinct
// event ids of its booking.released events.
type releaseSink struct {
	srv    *httptest.Server
	secret string
	mu     sync.Mutex
	seen   map[string]map[string]bool // booking id → event ids
}

func newReleaseSink(t *testing.T) *releaseSink {
	s := &releaseSink{seen: map[string]map[string]bool{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := webhook.Verify(s.secret, r.Header, body, time.Now(), webhook.DefaultTolerance); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev struct {
			Data struct {
				BookingID string `json:"booking_id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &ev)
		if s.seen[ev.Data.BookingID] == nil {
			s.seen[ev.Data.BookingID] = map[string]bool{}
		}
		s.seen[ev.Data.BookingID][r.Header.Get(webhook.HeaderID)] = true
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *releaseSink) bookings() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

func (s *releaseSink) ids() map[string]map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]map[string]bool, len(s.seen))
	for b, ids := range s.seen {
		out[b] = ids
	}
	return out
}
