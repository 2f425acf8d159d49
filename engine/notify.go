package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/internal/sqlstore"
	"github.com/slotwheel/slotwheel/engine/notify/webhook"
	"github.com/slotwheel/slotwheel/engine/notify/wechatmsg"
	"github.com/slotwheel/slotwheel/engine/wire"
	"github.com/slotwheel/slotwheel/models"
)

// Events reach people through sinks: webhook endpoints, and WeChat subscribe messages for users who
// logged in through WeChat. The relay moves outbox rows into deliveries (one per event and sink,
// created once whatever crashes) and hands each to the queue; a delivery goes out in event order
// per subject, retried with backoff until it succeeds, and is kept when it fails for good.

// DeliveryScheduler puts delivery tasks into the durable queue (jobs/ implements it).
type DeliveryScheduler interface {
	// ScheduleDelivery queues delivery id; attempt makes a manual retry a task of its own.
	ScheduleDelivery(ctx context.Context, deliveryID uint64, attempt int) error
}

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

// Sinks.
const sinkWechat = "wechat"

func webhookSink(id uint64) string { return "webhook:" + strconv.FormatUint(id, 10) }

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
func (e *Engine) CreateWebhook(ctx context.Context, a Actor, in WebhookInput) (Webhook, error) {
	if err := requireAdmin(a); err != nil {
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
		if _, err := e.cat.venue(ctx, in.VenueID); err != nil {
			return Webhook{}, unknown(err, "unknown_venue", "venue %d does not exist", in.VenueID)
		}
	}
	row := models.WebhookEndpoint{URL: in.URL, Secret: webhook.NewSecret(), EventTypes: encodeJSON(types), VenueID: in.VenueID,
		CreatedAt: e.clock.Now()}
	if err := e.ss.CreateEndpoint(ctx, &row); err != nil {
		return Webhook{}, err
	}
	w := toWebhook(row)
	w.Secret = row.Secret
	return w, nil
}

func toWebhook(r models.WebhookEndpoint) Webhook {
	w := Webhook{ID: r.ID, URL: r.URL, VenueID: r.VenueID, CreatedAt: r.CreatedAt.UTC(), EventTypes: []string{}}
	_ = json.Unmarshal([]byte(r.EventTypes), &w.EventTypes)
	return w
}

// ListWebhooks lists the endpoints, without their secrets. Admin only.
func (e *Engine) ListWebhooks(ctx context.Context, a Actor) ([]Webhook, error) {
	if err := requireAdmin(a); err != nil {
		return nil, err
	}
	rows, err := e.ss.Endpoints(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Webhook, len(rows))
	for i, r := range rows {
		out[i] = toWebhook(r)
	}
	return out, nil
}

// DeleteWebhook removes an endpoint; what still waited for it is skipped. Admin only.
func (e *Engine) DeleteWebhook(ctx context.Context, a Actor, id uint64) error {
	if err := requireAdmin(a); err != nil {
		return err
	}
	return e.ss.DeleteEndpoint(ctx, id, e.clock.Now())
}

// ListDeliveries lists an endpoint's deliveries, newest first, optionally of one status. Admin only.
func (e *Engine) ListDeliveries(ctx context.Context, a Actor, endpointID uint64, status, cursor string, limit int) ([]Delivery, string, error) {
	if err := requireAdmin(a); err != nil {
		return nil, "", err
	}
	if _, err := e.ss.Endpoint(ctx, endpointID); err != nil {
		return nil, "", err
	}
	switch status {
	case "", models.DeliveryPending, models.DeliverySucceeded, models.DeliveryFailed, models.DeliverySkipped:
	default:
		return nil, "", booking.Invalid("invalid_status", "status must be pending, succeeded, failed or skipped").WithField("status")
	}
	n, err := booking.PageSize(limit)
	if err != nil {
		return nil, "", err
	}
	q := sqlstore.DeliveryQuery{EndpointID: endpointID, Status: status, Limit: n + 1}
	if cursor != "" {
		if q.BeforeID, err = strconv.ParseUint(cursor, 10, 64); err != nil {
			return nil, "", booking.Invalid("invalid_cursor", "cursor %q is not one this server gave", cursor).WithField("cursor")
		}
	}
	rows, err := e.ss.Deliveries(ctx, q)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(rows) > n {
		rows = rows[:n]
		next = strconv.FormatUint(rows[n-1].ID, 10)
	}
	out := make([]Delivery, len(rows))
	for i, r := range rows {
		out[i] = Delivery{ID: r.ID, EventID: wire.EventID(r.EventID), Subject: r.Subject, Status: r.Status, Attempts: r.Attempts,
			LastStatus: r.LastStatus, LastError: r.LastError, CreatedAt: r.CreatedAt.UTC(), DoneAt: r.DoneAt}
		if ev, err := e.ss.Event(ctx, r.EventID); err == nil {
			out[i].EventType = ev.Type
		}
	}
	return out, next, nil
}

// RetryDelivery sends a failed (or skipped) delivery again, at once. Admin only.
func (e *Engine) RetryDelivery(ctx context.Context, a Actor, endpointID, deliveryID uint64) (Delivery, error) {
	if err := requireAdmin(a); err != nil {
		return Delivery{}, err
	}
	d, err := e.ss.ReopenDelivery(ctx, deliveryID, endpointID, e.clock.Now())
	if err != nil {
		return Delivery{}, err
	}
	if ds, ok := e.sched.(DeliveryScheduler); ok {
		if err := ds.ScheduleDelivery(ctx, d.ID, d.Attempts); err != nil {
			return Delivery{}, err
		}
	}
	return Delivery{ID: d.ID, EventID: wire.EventID(d.EventID), Subject: d.Subject, Status: d.Status, Attempts: d.Attempts,
		LastStatus: d.LastStatus, LastError: d.LastError, CreatedAt: d.CreatedAt.UTC()}, nil
}

// SetWechatTemplate maps an event type to a subscribe-message template. Admin only.
func (e *Engine) SetWechatTemplate(ctx context.Context, a Actor, t WechatTemplate) (WechatTemplate, error) {
	if err := requireAdmin(a); err != nil {
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
	row := models.WechatTemplate{EventType: t.EventType, TemplateID: t.TemplateID, Page: t.Page, Data: encodeJSON(t.Data), UpdatedAt: e.clock.Now()}
	return t, e.ss.SetTemplate(ctx, row)
}

// RelayOutbox hands unpublished events to their sinks: a delivery per matching webhook endpoint and,
// for a WeChat user with a template for the event's type, one for WeChat, each queued. A crash before
// the events are marked published repeats all of it harmlessly: deliveries are unique per event and
// sink, and their tasks per delivery. It answers how many events it published.
func (e *Engine) RelayOutbox(ctx context.Context) (int, error) {
	evs, err := e.ss.Unpublished(ctx, 500)
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	endpoints, err := e.ss.Endpoints(ctx)
	if err != nil {
		return 0, err
	}
	var templates map[string]models.WechatTemplate
	if e.opts.Notify.Wechat != nil {
		if templates, err = e.ss.Templates(ctx); err != nil {
			return 0, err
		}
	}
	now := e.clock.Now()
	ids := make([]uint64, len(evs))
	var ds []models.Delivery
	for i, ev := range evs {
		ids[i] = ev.ID
		for _, ep := range endpoints {
			w := toWebhook(ep)
			if (ep.VenueID == 0 || ep.VenueID == ev.VenueID) && (len(w.EventTypes) == 0 || slices.Contains(w.EventTypes, ev.Type)) {
				ds = append(ds, models.Delivery{Sink: webhookSink(ep.ID), EndpointID: ep.ID, EventID: ev.ID, Subject: ev.Subject,
					Status: models.DeliveryPending, CreatedAt: now, UpdatedAt: now})
			}
		}
		if _, ok := templates[ev.Type]; ok && strings.HasPrefix(ev.UserID, wechatUserPrefix) {
			ds = append(ds, models.Delivery{Sink: sinkWechat, EventID: ev.ID, Subject: ev.Subject, Status: models.DeliveryPending,
				CreatedAt: now, UpdatedAt: now})
		}
	}
	pending, err := e.ss.Publish(ctx, ids, ds, now)
	if err != nil {
		return 0, err
	}
	if sched, ok := e.sched.(DeliveryScheduler); ok {
		for _, d := range pending {
			if err := sched.ScheduleDelivery(ctx, d.ID, 0); err != nil {
				// The delivery stays pending; the relay does not see it again, so say so loudly:
				// a retry by hand (or the next start's reconciliation of deliveries) sends it.
				e.log.Error("queue delivery failed", "delivery_id", d.ID, "err", err)
			}
		}
	}
	metricEventsPublished.Add(float64(len(evs)))
	return len(evs), nil
}

// wechatUserPrefix starts the user id of a user who logged in through WeChat (api/ makes it).
const wechatUserPrefix = "wx:"

// ErrDeliveryRetry says a delivery did not go out and should be tried again later (a receiver
// refused it, or an earlier event of the subject is still on its way).
var ErrDeliveryRetry = errors.New("delivery to be retried")

// Deliver sends one delivery. It answers nil when the delivery is finished (sent, or failed or
// skipped for good), a *NotDueError when an earlier event of its subject is still on its way to the
// same sink, and an error wrapping ErrDeliveryRetry when this attempt failed; with last set (the
// queue's final attempt) a failure is recorded as final instead.
func (e *Engine) Deliver(ctx context.Context, deliveryID uint64, last bool) error {
	d, err := e.ss.Delivery(ctx, deliveryID)
	if sqlstore.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if d.Status != models.DeliveryPending {
		return nil
	}
	earlier, err := e.ss.EarlierPending(ctx, d)
	if err != nil {
		return err
	}
	if earlier {
		return &NotDueError{Wait: 500 * time.Millisecond}
	}
	ev, err := e.ss.Event(ctx, d.EventID)
	if err != nil {
		return err
	}
	var httpStatus int
	var sendErr error
	final := false
	switch {
	case d.Sink == sinkWechat:
		final, sendErr = e.sendWechat(ctx, ev)
	default:
		httpStatus, sendErr = e.sendWebhook(ctx, d, ev)
	}
	now := e.clock.Now()
	status := models.DeliverySucceeded
	msg := ""
	switch {
	case sendErr == nil:
	case errors.Is(sendErr, wechatmsg.ErrNotSubscribed), errors.Is(sendErr, errSinkGone):
		status, msg = models.DeliverySkipped, sendErr.Error()
	case final || last:
		status, msg = models.DeliveryFailed, sendErr.Error()
	default:
		status, msg = models.DeliveryPending, sendErr.Error()
	}
	if err := e.ss.FinishDelivery(ctx, d.ID, status, httpStatus, msg, now); err != nil {
		return err
	}
	metricDeliveries.WithLabelValues(sinkKind(d.Sink), status).Inc()
	if status == models.DeliverySucceeded {
		metricDeliveryDelay.Observe(now.Sub(ev.CreatedAt).Seconds())
	}
	if status == models.DeliveryPending {
		return fmt.Errorf("%w: %w", ErrDeliveryRetry, sendErr)
	}
	return nil
}

// errSinkGone: the endpoint was deleted, or WeChat is no longer configured.
var errSinkGone = errors.New("the sink is gone")

func sinkKind(sink string) string {
	if sink == sinkWechat {
		return sinkWechat
	}
	return "webhook"
}

// eventBody is the document a webhook receives.
func eventBody(ev models.OutboxEvent) []byte {
	return mustJSON(wire.Event{ID: wire.EventID(ev.ID), Type: ev.Type, Timestamp: wire.Time(ev.CreatedAt.UTC()),
		Data: json.RawMessage(ev.Data)})
}

func (e *Engine) sendWebhook(ctx context.Context, d models.Delivery, ev models.OutboxEvent) (int, error) {
	ep, err := e.ss.Endpoint(ctx, d.EndpointID)
	if err != nil {
		return 0, err
	}
	if ep.DeletedAt != nil {
		return 0, errSinkGone
	}
	sender := e.opts.Notify.Webhooks
	if sender == nil {
		sender = &webhook.Sender{}
	}
	res := sender.Send(ctx, webhook.Delivery{URL: ep.URL, Secret: ep.Secret, ID: wire.EventID(ev.ID), Timestamp: e.clock.Now(),
		Body: eventBody(ev)})
	if res.OK {
		return res.StatusCode, nil
	}
	if res.Err != nil {
		return res.StatusCode, res.Err
	}
	return res.StatusCode, fmt.Errorf("the receiver answered %d: %s", res.StatusCode, res.ResponseSnippet)
}

// sendWechat sends the event's subscribe message; final reports an error retrying cannot help.
func (e *Engine) sendWechat(ctx context.Context, ev models.OutboxEvent) (final bool, err error) {
	client := e.opts.Notify.Wechat
	if client == nil {
		return true, errSinkGone
	}
	templates, err := e.ss.Templates(ctx)
	if err != nil {
		return false, err
	}
	t, ok := templates[ev.Type]
	if !ok {
		return true, errSinkGone
	}
	var mapping map[string]string
	if err := json.Unmarshal([]byte(t.Data), &mapping); err != nil {
		return true, fmt.Errorf("template of %s: %w", ev.Type, err)
	}
	fields, err := e.messageFields(ctx, ev)
	if err != nil {
		return false, err
	}
	data := make(map[string]string, len(mapping))
	for key, field := range mapping {
		if v := fields[field]; v != "" {
			data[key] = v
		}
	}
	err = client.Send(ctx, wechatmsg.Message{ToUser: strings.TrimPrefix(ev.UserID, wechatUserPrefix), TemplateID: t.TemplateID,
		Page: t.Page, Data: data})
	return wechatmsg.Permanent(err), err
}

// messageFields are the values a template can show, from the event's data (a booking, a hold or a
// waitlist entry): names from the catalog, times venue-local as "2006-01-02 15:04".
func (e *Engine) messageFields(ctx context.Context, ev models.OutboxEvent) (map[string]string, error) {
	var raw map[string]any
	if err := json.Unmarshal([]byte(ev.Data), &raw); err != nil {
		return nil, fmt.Errorf("event %d data: %w", ev.ID, err)
	}
	str := func(k string) string { s, _ := raw[k].(string); return s }
	out := map[string]string{"status": str("status"), "checkin_code": str("checkin_code")}
	if q, ok := raw["quantity"].(float64); ok {
		out["quantity"] = strconv.Itoa(int(q))
	}
	var loc *time.Location
	if id, err := strconv.ParseUint(str("venue_id"), 10, 64); err == nil {
		if vi, err := e.cat.venue(ctx, id); err == nil {
			out["venue_name"], loc = vi.venue.Name, vi.loc
		}
	}
	if id, err := strconv.ParseUint(str("resource_id"), 10, 64); err == nil {
		if ri, err := e.cat.resource(ctx, id); err == nil {
			out["resource_name"] = ri.res.Name
		}
	}
	if id, err := strconv.ParseUint(str("service_id"), 10, 64); err == nil {
		if si, err := e.cat.service(ctx, id); err == nil {
			out["service_name"] = si.svc.Name
		}
	}
	for _, k := range []string{"start", "end", "release_at"} {
		if t, err := time.Parse(time.RFC3339, str(k)); err == nil {
			if loc != nil {
				t = t.In(loc)
			}
			out[k] = t.Format("2006-01-02 15:04")
		}
	}
	return out, nil
}

// requeueDeliveries queues again the deliveries pending for a while: their task may have been lost
// (Redis lost its data, or queuing failed). A delivery still queued is not queued twice: its task id
// is derived from it.
func (e *Engine) requeueDeliveries(ctx context.Context) error {
	sched, ok := e.sched.(DeliveryScheduler)
	if !ok {
		return nil
	}
	ids, err := e.ss.StalePending(ctx, e.clock.Now().Add(-time.Minute), 1000)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		errs = append(errs, sched.ScheduleDelivery(ctx, id, 0))
	}
	return errors.Join(errs...)
}

// pruneNotifications drops published events and finished deliveries past the retention.
func (e *Engine) pruneNotifications(ctx context.Context) error {
	keep := e.opts.Notify.Retention
	now := e.clock.Now()
	_, err := e.ss.Prune(ctx, now.Add(-keep), now.Add(-4*keep))
	return err
}
