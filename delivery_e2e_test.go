package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/notify/webhook"
)

// kill -9 of the process between a transition and its delivery loses no event: the booking's
// booking.confirmed is committed with the payment, its delivery is under way (the receiver holds
// the request) when the process dies, and the next process sends it again under the same
// webhook-id once the dead one's claim has run out; the next transition's event follows it, in
// order. (MariaDB + Redis under scripts/test.sh; the SQLite file and a fresh in-process Redis
// otherwise, where the kill also loses all of Redis.)
func TestKillBetweenTransitionAndDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	env := append(backends(t), "SLOTWHEEL_DEV_LOGIN=true")
	recv := newHoldingReceiver(t)
	addr := freeAddr(t)
	first := startInstance(t, "all", append(env, "SLOTWHEEL_HTTP_ADDR="+addr)...)
	c := &client{t: t, base: "http://" + addr}
	c.waitReady()
	admin := c.token("ops", "admin", "")
	recv.secret = c.do("POST", "/api/v1/admin/webhooks", admin, map[string]any{"url": recv.srv.URL,
		"event_types": []string{"booking.confirmed", "booking.cancelled"}}, 201)["secret"].(string)
	venue := c.do("POST", "/api/v1/admin/venues", admin, map[string]any{"name": "Kill Courts", "timezone": "Asia/Shanghai"}, 201)
	rid := c.do("POST", "/api/v1/admin/resources", admin, map[string]any{"venue_id": venue["venue_id"], "name": "Court",
		"kind": "court", "capacity": 1, "category": "kill", "price_cents": 100}, 201)["resource_id"].(string)
	c.do("PUT", "/api/v1/admin/resources/"+rid+"/schedule", admin, map[string]any{"slot_minutes": 60,
		"weekly": []map[string]any{{"weekdays": []int{1, 2, 3, 4, 5, 6, 7}, "open": "00:00", "close": "24:00"}}, "horizon_days": 3}, 200)

	start := time.Now().Truncate(time.Hour).Add(24 * time.Hour)
	alice := c.token("alice", "user", "")
	h := c.do("POST", "/api/v1/holds", alice, map[string]any{"resource_id": rid, "start": start.Format(time.RFC3339),
		"end": start.Add(time.Hour).Format(time.RFC3339)}, 201)
	paid := c.pay(h["hold_id"].(string), int64(h["amount_cents"].(float64)), "pay-kill")
	id := paid["booking"].(map[string]any)["booking_id"].(string)

	// The first attempt reaches the receiver, which keeps it waiting; the process dies meanwhile.
	var held string
	select {
	case held = <-recv.arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("booking.confirmed was never attempted")
	}
	_, err := first.stop(t, syscall.SIGKILL)
	require.Error(t, err, "killed")
	recv.answer.Store(true)

	addr = freeAddr(t)
	startInstance(t, "all", append(env, "SLOTWHEEL_HTTP_ADDR="+addr)...)
	c = &client{t: t, base: "http://" + addr}
	c.waitReady()
	// A transition after the restart: its event comes after the first, never before it.
	c.do("POST", "/api/v1/bookings/"+id+"/cancel", alice, map[string]any{}, 200)

	waitUntil(t, 2*time.Minute, "both events acknowledged", func() bool { return len(recv.acknowledged()) == 2 })
	got := recv.acknowledged()
	require.Equal(t, "booking.confirmed", got[0].typ)
	require.Equal(t, held, got[0].id, "sent again under the webhook-id of the attempt the kill cut")
	require.Equal(t, id, got[0].booking)
	require.Equal(t, "booking.cancelled", got[1].typ)
	require.Equal(t, id, got[1].booking)
	require.NotEqual(t, got[0].id, got[1].id)
}

// holdingReceiver is a webhook receiver that, until answer is set, reports each verified request
// on arrived and keeps it waiting for as long as the sender stays connected; once answer is set it
// acknowledges, keeping what it acknowledged in order.
type holdingReceiver struct {
	srv     *httptest.Server
	secret  string
	answer  atomic.Bool
	arrived chan string

	mu  sync.Mutex
	ack []receivedEvent
}

type receivedEvent struct{ id, typ, booking string }

func newHoldingReceiver(t *testing.T) *holdingReceiver {
	r := &holdingReceiver{arrived: make(chan string, 16)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if err := webhook.Verify(r.secret, req.Header, body, time.Now(), webhook.DefaultTolerance); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if !r.answer.Load() {
			r.arrived <- req.Header.Get(webhook.HeaderID)
			<-req.Context().Done() // the sender died, or gave up
			return
		}
		var ev struct {
			Type string `json:"type"`
			Data struct {
				BookingID string `json:"booking_id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &ev)
		r.mu.Lock()
		r.ack = append(r.ack, receivedEvent{id: req.Header.Get(webhook.HeaderID), typ: ev.Type, booking: ev.Data.BookingID})
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// acknowledged lists the events acknowledged so far, a redelivery of one (same webhook-id) once.
func (r *holdingReceiver) acknowledged() []receivedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedEvent
	seen := map[string]bool{}
	for _, e := range r.ack {
		if !seen[e.id] {
			seen[e.id] = true
			out = append(out, e)
		}
	}
	return out
}
