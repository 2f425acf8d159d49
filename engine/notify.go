package engine

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/notify/webhook"
	"github.com/slotwheel/slotwheel/engine/notify/wechatmsg"
	"github.com/slotwheel/slotwheel/engine/wire"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
	"github.com/slotwheel/slotwheel/models"
)

// The admin side of events: webhook endpoints and their deliveries, WeChat subscribe-message
// templates. How events travel is in deliver.go.

// NotifyOptions configure the sinks.
type NotifyOptions struct {
	// Webhooks sends webhook requests; nil uses webhook.Sender's defaults (10 s per delivery).
	Webhooks *webhook.Sender
	// Wechat sends subscribe messages; nil turns the WeChat sink off.
	Wechat *wechatmsg.Client
	// Retention is how long published events and finished deliveries are kept; default 7 days
	// (failed deliveries: four times as long, so that someone can look and retry).
	Retention time.Duration
}

// WebhookInput creates a webhook endpoint.
type WebhookInput struct {
	URL        string
	EventTypes []string // empty: every type
	VenueID    uint64   // 0: every venue
}

// Webhook is an endpoint; Secret is shown only when it is created.
type Webhook struct {
	ID         uint64
	URL        string
	EventTypes []string
	VenueID    uint64
	Secret     string
	CreatedAt  time.Time
}

// Delivery is one event on its way to one endpoint.
type Delivery struct {
	ID         uint64
	EventID    string
	EventType  string
	Subject    string
	Status     string
	Attempts   int
	LastStatus int
	LastError  string
	CreatedAt  time.Time
	DoneAt     *time.Time
	// NextAttemptAt is when a pending delivery is tried next (nil once it is finished).
	NextAttemptAt *time.Time
}

// WechatTemplate maps an event type to a WeChat subscribe-message template.
type WechatTemplate struct {
	EventType  string
	TemplateID string
	Page       string
	Data       map[string]string // template key (thing1, time2, …) → field (venue_name, start, …)
}

// wechatFields are the booking fields a template may show.
var wechatFields = []string{"venue_name", "resource_name", "service_name", "start", "end", "release_at", "status",
	"checkin_code", "quantity"}

// CreateWebhook adds an endpoint and answers it with its secret, generated here and shown once.
// Admin only.
func (n *Notifications) CreateWebhook(ctx context.Context, a booking.Actor, in WebhookInput) (Webhook, error) {
	if err := a.RequireAdmin(); err != nil {
		return Webhook{}, err
	}
	if err := webhook.ValidURL(in.URL); err != nil {
		return Webhook{}, booking.Invalid("invalid_url", "%v", err).WithField("url")
	}
	types := in.EventTypes
	if types == nil {
		types = []string{}
	}
	for _, t := range types {
		if !slices.Contains(booking.EventTypes(), t) {
			return Webhook{}, booking.Invalid("invalid_event_type", "%q is not an event type", t).WithField("event_types")
		}
	}
	if in.VenueID != 0 {
		if _, err := n.cat.Venue(ctx, in.VenueID); err != nil {
			return Webhook{}, booking.Unknown(err, "unknown_venue", "venue %d does not exist", in.VenueID)
		}
	}
	row, err := n.ss.CreateEndpoint(ctx, sqlstore.NewEndpoint{URL: in.URL, Secret: webhook.NewSecret(), EventTypes: types,
		VenueID: in.VenueID}, n.clock.Now())
	if err != nil {
		return Webhook{}, err
	}
	w := n.webhookView(ctx, row)
	w.Secret = row.Secret
	return w, nil
}

// webhookView is an endpoint as the API shows it: created_at in its venue's zone, or in UTC for an
// endpoint of every venue (it has no zone of its own).
func (n *Notifications) webhookView(ctx context.Context, r models.WebhookEndpoint) Webhook {
	return toWebhook(r, n.cat.Zone(ctx, r.VenueID))
}

func toWebhook(r models.WebhookEndpoint, loc *time.Location) Webhook {
	w := Webhook{ID: r.ID, URL: r.URL, VenueID: r.VenueID, CreatedAt: r.CreatedAt.In(loc), EventTypes: []string{}}
	_ = json.Unmarshal([]byte(r.EventTypes), &w.EventTypes)
	return w
}

// ListWebhooks lists the endpoints, without their secrets. Admin only.
func (n *Notifications) ListWebhooks(ctx context.Context, a booking.Actor) ([]Webhook, error) {
	if err := a.RequireAdmin(); err != nil {
		return nil, err
	}
	rows, err := n.ss.Endpoints(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Webhook, len(rows))
	for i, r := range rows {
		out[i] = n.webhookView(ctx, r)
	}
	return out, nil
}

// DeleteWebhook removes an endpoint and answers it as it was; what still waited for it is skipped.
// Admin only.
func (n *Notifications) DeleteWebhook(ctx context.Context, a booking.Actor, id uint64) (Webhook, error) {
	if err := a.RequireAdmin(); err != nil {
		return Webhook{}, err
	}
	row, err := n.ss.Endpoint(ctx, id)
	if err != nil {
		return Webhook{}, err
	}
	if row.DeletedAt != nil {
		return Webhook{}, booking.ErrNotFound
	}
	if err := n.ss.DeleteEndpoint(ctx, id, n.clock.Now()); err != nil {
		return Webhook{}, err
	}
	return n.webhookView(ctx, row), nil
}

// ListDeliveries lists an endpoint's deliveries, newest first, optionally of one status. Admin only.
func (n *Notifications) ListDeliveries(ctx context.Context, a booking.Actor, endpointID uint64, status, cursor string, limit int) ([]Delivery, string, error) {
	if err := a.RequireAdmin(); err != nil {
		return nil, "", err
	}
	if _, err := n.ss.Endpoint(ctx, endpointID); err != nil {
		return nil, "", err
	}
	switch status {
	case "", models.DeliveryPending, models.DeliverySucceeded, models.DeliveryFailed, models.DeliverySkipped:
	default:
		return nil, "", booking.Invalid("invalid_status", "status must be pending, succeeded, failed or skipped").WithField("status")
	}
	page, err := sqlstore.ParsePage(cursor, limit)
	if err != nil {
		return nil, "", err
	}
	rows, err := n.ss.Deliveries(ctx, sqlstore.DeliveryQuery{EndpointID: endpointID, Status: status, Page: page})
	if err != nil {
		return nil, "", err
	}
	rows, next := sqlstore.NextPage(page, rows, func(r models.Delivery) uint64 { return r.ID })
	ids := make([]uint64, len(rows))
	for i, r := range rows {
		ids[i] = r.EventID
	}
	heads, err := n.ss.EventHeads(ctx, ids)
	if err != nil {
		return nil, "", err
	}
	out := make([]Delivery, len(rows))
	for i, r := range rows {
		ev := heads[r.EventID]
		out[i] = toDelivery(r, n.cat.Zone(ctx, ev.VenueID))
		out[i].EventType = ev.Type
	}
	return out, next, nil
}

// toDelivery is a delivery as the API shows it, its times in loc: the zone of its event's venue (UTC
// for an event of no venue), as the event's own data is.
func toDelivery(r models.Delivery, loc *time.Location) Delivery {
	d := Delivery{ID: r.ID, EventID: wire.EventID(r.EventID), Subject: r.Subject, Status: r.Status, Attempts: r.Attempts,
		LastStatus: r.LastStatus, LastError: r.LastError, CreatedAt: r.CreatedAt.In(loc)}
	if r.DoneAt != nil {
		done := r.DoneAt.In(loc)
		d.DoneAt = &done
	}
	if r.Status == models.DeliveryPending {
		next := r.NextAttemptAt.In(loc)
		d.NextAttemptAt = &next
	}
	return d
}

// RetryDelivery sends a failed (or skipped) delivery again, at once, with a new series of retries
// should it fail again; a delivery that succeeded is answered as it is. Admin only.
func (n *Notifications) RetryDelivery(ctx context.Context, a booking.Actor, endpointID, deliveryID uint64) (Delivery, error) {
	if err := a.RequireAdmin(); err != nil {
		return Delivery{}, err
	}
	d, err := n.ss.ReopenDelivery(ctx, deliveryID, endpointID, n.clock.Now())
	if err != nil {
		return Delivery{}, err
	}
	if d.Status == models.DeliveryPending {
		n.queueDelivery(ctx, d.ID, "manual-"+strconv.Itoa(d.Attempts), d.NextAttemptAt)
	}
	ev, err := n.ss.Event(ctx, d.EventID)
	out := toDelivery(d, n.cat.Zone(ctx, ev.VenueID))
	if err == nil {
		out.EventType = ev.Type
	}
	return out, nil
}

// SetWechatTemplate maps an event type to a subscribe-message template. Admin only.
func (n *Notifications) SetWechatTemplate(ctx context.Context, a booking.Actor, t WechatTemplate) (WechatTemplate, error) {
	if err := a.RequireAdmin(); err != nil {
		return WechatTemplate{}, err
	}
	if !slices.Contains(booking.EventTypes(), t.EventType) {
		return WechatTemplate{}, booking.Invalid("invalid_event_type", "%q is not an event type", t.EventType).WithField("event_type")
	}
	if t.TemplateID == "" || len(t.TemplateID) > 128 {
		return WechatTemplate{}, booking.Invalid("invalid_template_id", "template_id must be 1 to 128 characters").WithField("template_id")
	}
	if len(t.Page) > 512 {
		return WechatTemplate{}, booking.Invalid("invalid_page", "page must be at most 512 characters").WithField("page")
	}
	if len(t.Data) == 0 {
		return WechatTemplate{}, booking.Invalid("invalid_template_data", "data must map at least one template key").WithField("data")
	}
	for k, f := range t.Data {
		if !wechatmsg.KnownKey(k) {
			return WechatTemplate{}, booking.Invalid("invalid_template_data", "%q is not a template key such as thing1 or time2", k).WithField("data")
		}
		if !slices.Contains(wechatFields, f) {
			return WechatTemplate{}, booking.Invalid("invalid_template_data", "%q is not one of %s", f, strings.Join(wechatFields, ", ")).WithField("data." + k)
		}
	}
	return t, n.ss.SetTemplate(ctx, sqlstore.Template{EventType: t.EventType, TemplateID: t.TemplateID, Page: t.Page,
		Data: t.Data}, n.clock.Now())
}

// WechatTemplates lists the subscribe-message templates by event type. Admin only.
func (n *Notifications) WechatTemplates(ctx context.Context, a booking.Actor) ([]WechatTemplate, error) {
	if err := a.RequireAdmin(); err != nil {
		return nil, err
	}
	rows, err := n.ss.Templates(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]WechatTemplate, 0, len(rows))
	for _, r := range rows {
		t := WechatTemplate{EventType: r.EventType, TemplateID: r.TemplateID, Page: r.Page, Data: map[string]string{}}
		_ = json.Unmarshal([]byte(r.Data), &t.Data)
		out = append(out, t)
	}
	slices.SortFunc(out, func(x, y WechatTemplate) int { return strings.Compare(x.EventType, y.EventType) })
	return out, nil
}

// WechatEnabled reports whether subscribe messages can be sent (WeChat's app id and secret are
// configured).
func (n *Notifications) WechatEnabled() bool { return n.notify.Wechat != nil }
