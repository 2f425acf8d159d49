package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slotwheel/slotwheel/engine/notify/webhook"
	"github.com/slotwheel/slotwheel/engine/wire"
)

// Webhook is a webhook endpoint as the API shows it; Secret only in the answer that created it.
type Webhook struct {
	ID         string   `json:"webhook_id"`
	URL        string   `json:"url"`
	EventTypes []string `json:"event_types"`
	Secret     string   `json:"secret"`
}

// CreateWebhook registers an endpoint for events of types (none: every type) at every venue.
func (c *Client) CreateWebhook(ctx context.Context, admin, url string, types ...string) (Webhook, error) {
	if types == nil {
		types = []string{}
	}
	var w Webhook
	err := c.Do(ctx, http.MethodPost, "/api/v1/admin/webhooks", admin, map[string]any{"url": url, "event_types": types}, &w)
	return w, err
}

// Receiver is a webhook endpoint the test runs itself, registered with the fleet: it checks every
// delivery's signature, acknowledges it, and remembers the events it got. Delivery is at least
// once, so an event may come more than once; it is counted once.
type Receiver struct {
	f     *Fleet
	srv   *httptest.Server
	types []string

	mu       sync.Mutex
	secret   string
	got      map[string]string // event id → type
	repeats  int               // deliveries of an event already received
	rejected []string          // deliveries whose signature or body did not check
}

// NewReceiver starts a receiver (stopped when the test ends) and registers it through the first
// instance for events of types (none: every type).
func (f *Fleet) NewReceiver(ctx context.Context, types ...string) (*Receiver, error) {
	r := &Receiver{f: f, types: types, got: map[string]string{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	f.t.Cleanup(r.srv.Close)
	w, err := f.Client(0).CreateWebhook(ctx, f.Token("fleet-admin", "admin", ""), r.srv.URL+"/hooks", types...)
	if err != nil {
		return nil, fmt.Errorf("register the receiver: %w", err)
	}
	r.mu.Lock()
	r.secret = w.Secret
	r.mu.Unlock()
	return r, nil
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		err = webhook.Verify(r.secret, req.Header, body, time.Now(), 0)
	}
	var ev wire.Event
	if err == nil {
		err = json.Unmarshal(body, &ev)
	}
	if err == nil && ev.ID != req.Header.Get(webhook.HeaderID) {
		err = fmt.Errorf("body id %q, header id %q", ev.ID, req.Header.Get(webhook.HeaderID))
	}
	if err != nil {
		r.rejected = append(r.rejected, err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if _, seen := r.got[ev.ID]; seen {
		r.repeats++
	}
	r.got[ev.ID] = ev.Type
	w.WriteHeader(http.StatusNoContent)
}

// Received counts the distinct events received, and the deliveries that repeated one.
func (r *Receiver) Received() (events, repeats int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got), r.repeats
}

// Rejected are the deliveries whose signature, or body, did not check.
func (r *Receiver) Rejected() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.rejected)
}

// Missing lists the events of the receiver's types in the fleet's outbox that it has not received,
// as "evt_<id> <type>", oldest first. Call it after the events of interest were written: the
// receiver was registered before them.
func (r *Receiver) Missing(ctx context.Context) ([]string, error) {
	q := "SELECT id, type FROM outbox_events"
	args := make([]any, len(r.types))
	if len(r.types) > 0 {
		q += " WHERE type IN (?" + strings.Repeat(",?", len(r.types)-1) + ")"
		for i, t := range r.types {
			args[i] = t
		}
	}
	rows, err := r.f.db.QueryContext(ctx, q+" ORDER BY id", args...)
	if err != nil {
		return nil, fmt.Errorf("outbox events: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var missing []string
	err = scanAll(rows, func() error {
		var id uint64
		var typ string
		if err := rows.Scan(&id, &typ); err != nil {
			return err
		}
		if _, ok := r.got[wire.EventID(id)]; !ok {
			missing = append(missing, "evt_"+strconv.FormatUint(id, 10)+" "+typ)
		}
		return nil
	})
	return missing, err
}
