package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/catalog"
	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/engine/detach"
	"github.com/slotwheel/slotwheel/engine/notify"
	"github.com/slotwheel/slotwheel/engine/notify/webhook"
	"github.com/slotwheel/slotwheel/engine/notify/wechatmsg"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/engine/wire"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
	"github.com/slotwheel/slotwheel/models"
)

// Notifications owns what the engine tells people: the outbox relay, webhooks, WeChat messages and
// reminders (deliver.go, notify.go, the reminders of loops.go).
type Notifications struct {
	ss     *sqlstore.Store
	cat    *catalog.Cache
	events *events
	clock  clock.Clock
	log    *slog.Logger
	sched  release.Scheduler
	hooks  *testHooks

	notify NotifyOptions // Options.Notify

	senderOnce sync.Once
	sender     *webhook.Sender // webhookSender's default
}

// Events reach people through sinks: webhook endpoints, and WeChat subscribe messages for users who
// logged in through WeChat. The relay turns outbox rows into deliveries (one per event and sink,
// created once whatever crashes) and marks the events published in the same transaction.
//
// The deliveries of one subject and sink form a chain in event order: only its head is attempted,
// and finishing it (sent, failed for good, or skipped) lets the next go, so a receiver never sees
// booking.released before booking.confirmed. Every attempt first claims its delivery (a claim token
// with an expiry), so two workers never send one delivery at once, and a claim left by a process
// that died runs out.
//
// The relay sends the first attempt of what it publishes itself, many chains at once, and records
// the outcomes in one statement: a burst of releases reaches receivers in well under a second
// without a queue round trip and a handful of SQL statements per delivery. What fails is retried
// through the durable queue (jobs/) along notify.NextAttempt; a chain's next delivery, or one whose
// task was lost, is queued again by Deliver and the requeue loop.

// DeliveryScheduler puts delivery tasks into the durable queue (jobs/ implements it).
type DeliveryScheduler interface {
	// ScheduleDelivery queues an attempt of delivery id at at. key tells the tasks of one delivery
	// apart (its attempt number, the delivery before it in the chain, a requeue); a task with the same
	// delivery and key already queued counts as success.
	ScheduleDelivery(ctx context.Context, deliveryID uint64, key string, at time.Time) error
}

// deliveryClaim bounds one attempt's claim: a webhook receiver has 10 s, and the database some more.
const deliveryClaim = 45 * time.Second

// relayWait is how long the relay waits for the attempts it started before it moves on to the next
// batch; attempts still running then (a slow receiver) finish on their own.
const relayWait = 2 * time.Second

// relayConcurrency bounds the chains the relay sends at once.
const relayConcurrency = 64

// Sinks.
const sinkWechat = "wechat"

func webhookSink(id uint64) string { return "webhook:" + strconv.FormatUint(id, 10) }

func sinkKind(sink string) string {
	if sink == sinkWechat {
		return sinkWechat
	}
	return "webhook"
}

// errSinkGone: the endpoint was deleted, or WeChat is no longer configured.
var errSinkGone = errors.New("the sink is gone")

func newClaimToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// webhookSender is the sender of the deployment's webhooks: many deliveries go to the same few
// receivers at once, so it keeps connections to them open.
func (n *Notifications) webhookSender() *webhook.Sender {
	if s := n.notify.Webhooks; s != nil {
		return s
	}
	n.senderOnce.Do(func() {
		tr := &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          512,
			MaxIdleConnsPerHost:   relayConcurrency,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   5 * time.Second,
			ExpectContinueTimeout: time.Second,
			ForceAttemptHTTP2:     true,
		}
		n.sender = &webhook.Sender{Client: &http.Client{Transport: tr}}
	})
	return n.sender
}

// RelayOutbox publishes unpublished events — a delivery per matching webhook endpoint and, for a
// WeChat user with a template for the event's type, one for WeChat — and makes their first
// attempts. It answers how many events it published. A crash at any point repeats nothing that
// finished and loses nothing: deliveries are unique per event and sink, and a delivery left
// claimed is picked up by the requeue loop once its claim runs out.
func (n *Notifications) RelayOutbox(ctx context.Context) (int, error) {
	evs, err := n.ss.Unpublished(ctx, 500)
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	endpoints, err := n.ss.Endpoints(ctx)
	if err != nil {
		return 0, err
	}
	var templates map[string]models.WechatTemplate
	if n.notify.Wechat != nil {
		if templates, err = n.ss.Templates(ctx); err != nil {
			return 0, err
		}
	}
	now := n.clock.Now()
	token := newClaimToken()
	ids := make([]uint64, len(evs))
	byID := make(map[uint64]models.OutboxEvent, len(evs))
	var ds []sqlstore.NewDelivery
	add := func(sink string, endpointID uint64, ev models.OutboxEvent) {
		ds = append(ds, sqlstore.NewDelivery{Sink: sink, EndpointID: endpointID, EventID: ev.ID, Subject: ev.Subject})
	}
	for i, ev := range evs {
		ids[i], byID[ev.ID] = ev.ID, ev
		for _, ep := range endpoints {
			w := toWebhook(ep, time.UTC) // only its event types are read
			if (ep.VenueID == 0 || ep.VenueID == ev.VenueID) && (len(w.EventTypes) == 0 || slices.Contains(w.EventTypes, ev.Type)) {
				add(webhookSink(ep.ID), ep.ID, ev)
			}
		}
		if _, wechatUser := booking.WechatOpenID(ev.UserID); wechatUser && templates[ev.Type].TemplateID != "" {
			add(sinkWechat, 0, ev)
		}
	}
	ours, err := n.ss.Publish(ctx, ids, ds, now, token, now.Add(deliveryClaim))
	if err != nil {
		return 0, err
	}
	metricEventsPublished.Add(float64(len(evs)))
	if n.hooks.afterPublish != nil {
		if err := n.hooks.afterPublish(); err != nil {
			return len(evs), err
		}
	}
	if len(ours) == 0 {
		return len(evs), nil
	}
	chains, blocked, err := n.chainsToSend(ctx, ours)
	if err != nil {
		// The deliveries are published and claimed; the requeue loop sends them once the claims run out.
		n.log.Warn("relay could not order its deliveries; the requeue loop will send them", "err", err)
		return len(evs), nil
	}
	if len(blocked) > 0 {
		// An earlier event of their subject still waits for the sink: finishing it lets these go.
		if err := n.ss.Unclaim(ctx, token, blocked); err != nil {
			n.log.Warn("unclaim deliveries failed; their claims run out", "err", err)
		}
	}
	eps := make(map[uint64]models.WebhookEndpoint, len(endpoints))
	for _, ep := range endpoints {
		eps[ep.ID] = ep
	}
	n.sendChains(ctx, token, chains, byID, eps)
	return len(evs), nil
}

// chainsToSend groups deliveries by subject and sink, in event order, and splits off the chains
// that must wait: an earlier event of theirs is still pending for the same sink.
func (n *Notifications) chainsToSend(ctx context.Context, ds []models.Delivery) (chains [][]models.Delivery, blocked []uint64, err error) {
	type key struct{ sink, subject string }
	index := map[key]int{}
	var subjects []string
	for _, d := range ds {
		k := key{d.Sink, d.Subject}
		i, ok := index[k]
		if !ok {
			i = len(chains)
			index[k] = i
			chains = append(chains, nil)
			subjects = append(subjects, d.Subject)
		}
		chains[i] = append(chains[i], d)
	}
	firsts, err := n.ss.FirstPending(ctx, subjects)
	if err != nil {
		return nil, nil, err
	}
	out := chains[:0]
	for _, c := range chains {
		if first, ok := firsts[sqlstore.Chain{Sink: c[0].Sink, Subject: c[0].Subject}]; ok && first < c[0].EventID {
			for _, d := range c {
				blocked = append(blocked, d.ID)
			}
			continue
		}
		out = append(out, c)
	}
	return out, blocked, nil
}

// relayBatch gathers the outcomes of the relay's attempts while it waits for them, to record them
// together; an attempt that finishes after the relay moved on records its own.
type relayBatch struct {
	mu       sync.Mutex
	closed   bool
	finished []attemptResult
}

// add keeps r for the batch; false once the relay stopped waiting.
func (b *relayBatch) add(r attemptResult) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.finished = append(b.finished, r)
	return true
}

func (b *relayBatch) close() []attemptResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return b.finished
}

// sendChains attempts the chains at once (each in event order), waits for them up to relayWait and
// records their outcomes.
func (n *Notifications) sendChains(ctx context.Context, token string, chains [][]models.Delivery, evs map[uint64]models.OutboxEvent,
	eps map[uint64]models.WebhookEndpoint) {
	batch := &relayBatch{}
	sem := make(chan struct{}, relayConcurrency)
	var wg sync.WaitGroup
	// The attempts outlive the relay's run when a receiver is slow; they end with the claim.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliveryClaim-5*time.Second)
	for _, chain := range chains {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			for i, d := range chain {
				r := n.attempt(actx, d, evs[d.EventID], eps)
				r.token = token
				if !batch.add(r) {
					n.finishAttempt(actx, r, true)
				}
				if r.status == models.DeliveryPending || r.status == models.DeliveryFailed {
					// The rest of the chain waits for this one's retries.
					n.unclaimRest(actx, token, chain[i+1:])
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		cancel()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(relayWait):
	case <-ctx.Done():
	}
	n.finishBatch(ctx, token, batch.close())
}

func (n *Notifications) unclaimRest(ctx context.Context, token string, rest []models.Delivery) {
	if len(rest) == 0 {
		return
	}
	ids := make([]uint64, len(rest))
	for i, d := range rest {
		ids[i] = d.ID
	}
	if err := n.ss.Unclaim(ctx, token, ids); err != nil {
		n.log.Warn("unclaim deliveries failed; their claims run out", "err", err)
	}
}

// finishBatch records the relay's outcomes: the sent ones in a statement per HTTP status they were
// answered with (nearly always one), the others one by one (they are few, and each needs its retry
// queued).
func (n *Notifications) finishBatch(ctx context.Context, token string, rs []attemptResult) {
	lctx, cancel := detach.Later(ctx)
	defer cancel()
	sent := map[int][]uint64{} // by HTTP status
	now := n.clock.Now()
	for _, r := range rs {
		if r.status == models.DeliverySucceeded {
			sent[r.HTTPStatus] = append(sent[r.HTTPStatus], r.d.ID)
			continue
		}
		n.finishAttempt(lctx, r, false)
	}
	recorded := map[int]bool{}
	for httpStatus, ids := range sent {
		if err := n.ss.FinishSent(lctx, token, httpStatus, ids, now); err != nil {
			// Not recorded: the claims run out and the deliveries are sent again, with the same
			// webhook-id (at least once).
			n.log.Warn("record sent deliveries failed; they will be sent again", "n", len(ids), "err", err)
			continue
		}
		recorded[httpStatus] = true
	}
	for _, r := range rs {
		if r.status == models.DeliverySucceeded && recorded[r.HTTPStatus] {
			observeAttempt(r, now)
		}
	}
}

// attemptResult is the outcome of one attempt of a delivery.
type attemptResult struct {
	d     models.Delivery
	ev    models.OutboxEvent
	token string
	sqlstore.Attempt
	status string
}

// attempt sends d once and decides its outcome: succeeded, skipped (the sink will never take it),
// pending (to be retried at Next) or failed (for good).
func (n *Notifications) attempt(ctx context.Context, d models.Delivery, ev models.OutboxEvent, eps map[uint64]models.WebhookEndpoint) attemptResult {
	r := attemptResult{d: d, ev: ev}
	var sendErr error
	final := false
	if d.Sink == sinkWechat {
		if final, sendErr = n.sendWechat(ctx, ev); sendErr == nil {
			r.HTTPStatus = http.StatusOK // WeChat says errcode 0 in a 200
		}
	} else {
		r.HTTPStatus, sendErr = n.sendWebhook(ctx, d, ev, eps)
	}
	now := n.clock.Now()
	r.Retries = d.Retries
	switch {
	case sendErr == nil:
		r.status = models.DeliverySucceeded
	case errors.Is(sendErr, wechatmsg.ErrNotSubscribed), errors.Is(sendErr, errSinkGone):
		r.status, r.Err = models.DeliverySkipped, sendErr.Error()
	default:
		r.Retries++
		r.Err = sendErr.Error()
		var retry bool
		if r.Next, retry = notify.NextAttempt(r.Retries, now); retry && !final {
			r.status = models.DeliveryPending
		} else {
			r.status = models.DeliveryFailed
		}
	}
	r.Status = r.status
	return r
}

// finishAttempt records one attempt, queues its retry (pending) or, when it finished the delivery and
// asked to, the next delivery of its chain.
func (n *Notifications) finishAttempt(ctx context.Context, r attemptResult, queueNext bool) {
	now := n.clock.Now()
	if err := n.ss.FinishDelivery(ctx, r.d.ID, r.token, r.Attempt, now); err != nil {
		n.log.Warn("record delivery attempt failed; its claim runs out and it is tried again", "delivery_id", r.d.ID, "err", err)
		return
	}
	observeAttempt(r, now)
	if r.status == models.DeliveryPending {
		n.queueDelivery(ctx, r.d.ID, "a"+strconv.Itoa(r.d.Attempts+1), r.Next)
		return
	}
	if queueNext {
		n.queueNextInChain(ctx, r.d)
	}
}

func observeAttempt(r attemptResult, now time.Time) {
	metricDeliveries.WithLabelValues(sinkKind(r.d.Sink), r.status).Inc()
	if r.status == models.DeliverySucceeded {
		metricDeliveryDelay.Observe(now.Sub(r.ev.CreatedAt).Seconds())
	}
}

// queueNextInChain queues the next pending delivery of d's chain, now that d is finished.
func (n *Notifications) queueNextInChain(ctx context.Context, d models.Delivery) {
	next, ok, err := n.ss.NextInChain(ctx, d.Sink, d.Subject)
	if err != nil {
		n.log.Warn("find the next delivery failed; the requeue loop will", "delivery_id", d.ID, "err", err)
		return
	}
	if ok {
		n.queueDelivery(ctx, next.ID, "after-"+strconv.FormatUint(d.ID, 10), next.NextAttemptAt)
	}
}

// queueDelivery hands an attempt to the queue. A failure is logged, not returned: the delivery is
// in SQL, and the requeue loop queues it again.
func (n *Notifications) queueDelivery(ctx context.Context, id uint64, key string, at time.Time) {
	sched, ok := n.sched.(DeliveryScheduler)
	if !ok {
		return
	}
	if err := sched.ScheduleDelivery(ctx, id, key, at); err != nil {
		n.log.Warn("queue delivery failed; the requeue loop will", "delivery_id", id, "err", err)
	}
}

// Deliver makes one attempt of a delivery from the queue, if it is due, the head of its chain and
// not in flight elsewhere (otherwise there is nothing to do now, and it answers nil). A failed
// attempt is queued again along notify.NextAttempt, or failed for good once the schedule is over; a
// finished delivery queues the next of its chain. An error means the attempt could not be made (a
// backend is away), and the task should be run again.
func (n *Notifications) Deliver(ctx context.Context, deliveryID uint64) error {
	now := n.clock.Now()
	token := newClaimToken()
	// Asynq keeps scheduled times in whole seconds and may start a task up to a second early.
	d, ok, err := n.ss.ClaimDelivery(ctx, deliveryID, token, now.Add(time.Second), now.Add(deliveryClaim))
	if err != nil || !ok {
		return err
	}
	ev, err := n.ss.Event(ctx, d.EventID)
	var eps map[uint64]models.WebhookEndpoint
	if err == nil && d.Sink != sinkWechat {
		var ep models.WebhookEndpoint
		if ep, err = n.ss.Endpoint(ctx, d.EndpointID); err == nil {
			eps = make(map[uint64]models.WebhookEndpoint, 1)
			eps[ep.ID] = ep
		}
	}
	if err != nil {
		lctx, cancel := detach.Later(ctx)
		defer cancel()
		return errors.Join(err, n.ss.Unclaim(lctx, token, []uint64{d.ID}))
	}
	r := n.attempt(ctx, d, ev, eps)
	r.token = token
	// What the attempt did is recorded even when the task's context ended meanwhile.
	lctx, cancel := detach.Later(ctx)
	defer cancel()
	n.finishAttempt(lctx, r, true)
	return nil
}

// eventBody is the document a webhook receives.
func eventBody(ev models.OutboxEvent) []byte {
	return mustJSON(wire.Event{ID: wire.EventID(ev.ID), Type: ev.Type, Timestamp: wire.Time(ev.CreatedAt.UTC()),
		Data: json.RawMessage(ev.Data)})
}

func (n *Notifications) sendWebhook(ctx context.Context, d models.Delivery, ev models.OutboxEvent, eps map[uint64]models.WebhookEndpoint) (int, error) {
	ep, ok := eps[d.EndpointID]
	if !ok || ep.DeletedAt != nil {
		return 0, errSinkGone
	}
	res := n.webhookSender().Send(ctx, webhook.Delivery{URL: ep.URL, Secret: ep.Secret, ID: wire.EventID(ev.ID),
		Timestamp: n.clock.Now(), Body: eventBody(ev)})
	if res.OK {
		return res.StatusCode, nil
	}
	if res.Err != nil {
		return res.StatusCode, res.Err
	}
	return res.StatusCode, fmt.Errorf("the receiver answered %d: %s", res.StatusCode, res.ResponseSnippet)
}

// sendWechat sends the event's subscribe message; final reports an error retrying cannot help.
func (n *Notifications) sendWechat(ctx context.Context, ev models.OutboxEvent) (final bool, err error) {
	client := n.notify.Wechat
	if client == nil {
		return true, errSinkGone
	}
	openid, ok := booking.WechatOpenID(ev.UserID)
	if !ok {
		return true, errSinkGone // the user was erased since the event was published: nobody to address
	}
	templates, err := n.ss.Templates(ctx)
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
	fields, err := n.messageFields(ctx, ev)
	if err != nil {
		return false, err
	}
	data := make(map[string]string, len(mapping))
	for key, field := range mapping {
		if v := fields[field]; v != "" {
			data[key] = v
		}
	}
	err = client.Send(ctx, wechatmsg.Message{ToUser: openid, TemplateID: t.TemplateID,
		Page: t.Page, Data: data})
	return wechatmsg.Permanent(err), err
}

// messageFields are the values a template can show, from the event's data (a booking, a hold or a
// waitlist entry): names from the catalog, times venue-local as "2006-01-02 15:04".
func (n *Notifications) messageFields(ctx context.Context, ev models.OutboxEvent) (map[string]string, error) {
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
		if vi, err := n.cat.Venue(ctx, id); err == nil {
			out["venue_name"], loc = vi.Venue.Name, vi.Loc
		}
	}
	if id, err := strconv.ParseUint(str("resource_id"), 10, 64); err == nil {
		if ri, err := n.cat.Resource(ctx, id); err == nil {
			out["resource_name"] = ri.Resource.Name
		}
	}
	if id, err := strconv.ParseUint(str("service_id"), 10, 64); err == nil {
		if si, err := n.cat.Service(ctx, id); err == nil {
			out["service_name"] = si.Service.Name
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

// requeueDeliveries queues again the heads of chains whose attempt is overdue by more than a few
// seconds: their task was lost (Redis lost its data, queuing failed, the process died between
// publishing and queuing, or a task ran out of its own retries while SQL was away). A delivery still
// queued or in flight is not sent twice: its attempt claims it first.
func (n *Notifications) requeueDeliveries(ctx context.Context) error {
	if _, ok := n.sched.(DeliveryScheduler); !ok {
		return nil
	}
	now := n.clock.Now()
	ids, err := n.ss.StaleHeads(ctx, now.Add(-requeueAfter), now, 1000)
	if err != nil {
		return err
	}
	// One key per period, so that a requeue is not refused for a task id that a finished or
	// archived task still holds.
	key := "requeue-" + strconv.FormatInt(now.Unix()/int64(requeueAfter/time.Second), 10)
	for _, id := range ids {
		n.queueDelivery(ctx, id, key, now)
	}
	metricDeliveriesRequeued.Add(float64(len(ids)))
	return nil
}

// requeueAfter is how overdue a chain's head must be before it is queued again.
const requeueAfter = 10 * time.Second

// pruneNotifications drops published events and finished deliveries past the retention.
func (n *Notifications) pruneNotifications(ctx context.Context) error {
	keep := n.notify.Retention
	now := n.clock.Now()
	_, err := n.ss.Prune(ctx, now.Add(-keep), now.Add(-4*keep))
	return err
}

// The metrics of this file (engine.go says why they are package-level).
var (
	metricEventsPublished = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_events_published_total", Help: "Outbox events handed to their sinks by the relay.",
	})
	metricDeliveries = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_deliveries_total", Help: "Delivery attempts by sink (webhook, wechat) and outcome (succeeded, pending: to be retried, failed, skipped).",
	}, []string{"sink", "outcome"})
	metricDeliveriesRequeued = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_deliveries_requeued_total", Help: "Deliveries queued again because their task was lost.",
	})
	metricDeliveryDelay = promauto.NewHistogram(prometheus.HistogramOpts{
		Name: "slotwheel_delivery_delay_seconds", Help: "Seconds from an event's transition to its successful delivery.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400},
	})
)

// Every label value is registered up front (engine.go says why).
func init() {
	for _, s := range []string{"webhook", "wechat"} {
		for _, o := range []string{"succeeded", "pending", "failed", "skipped"} {
			metricDeliveries.WithLabelValues(s, o)
		}
	}
}
