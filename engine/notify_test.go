package engine

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/engine/notify/webhook"
	"github.com/slotwheel/slotwheel/engine/notify/wechatmsg"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/internal/testenv/wechatfake"
	"github.com/slotwheel/slotwheel/models"
)

// fakeQueue stands in for jobs/ in engine tests: it keeps the delivery tasks the engine queues
// (one per delivery and key, as Asynq's task ids do) and runs those due at the test clock.
type fakeQueue struct {
	mu    sync.Mutex
	tasks map[string]queuedDelivery
	fail  bool // ScheduleDelivery refuses, as a queue that lost its Redis would
}

type queuedDelivery struct {
	id uint64
	at time.Time
}

func newFakeQueue() *fakeQueue { return &fakeQueue{tasks: map[string]queuedDelivery{}} }

func (q *fakeQueue) ScheduleRelease(context.Context, release.Ref) (bool, error) { return true, nil }
func (q *fakeQueue) CancelRelease(context.Context, release.Ref) error           { return nil }

func (q *fakeQueue) ScheduleDelivery(_ context.Context, id uint64, key string, at time.Time) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fail {
		return booking.ErrBackendUnavailable
	}
	k := strconv.FormatUint(id, 10) + ":" + key
	if _, ok := q.tasks[k]; !ok {
		q.tasks[k] = queuedDelivery{id: id, at: at}
	}
	return nil
}

// due takes the tasks due at now (Asynq may start them up to a second early).
func (q *fakeQueue) due(now time.Time) []uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	var ids []uint64
	for k, t := range q.tasks {
		if !t.at.After(now.Add(time.Second)) {
			ids = append(ids, t.id)
			delete(q.tasks, k)
		}
	}
	slices.Sort(ids)
	return ids
}

// next is the earliest time a queued task is due; ok is false when nothing is queued.
func (q *fakeQueue) next() (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var first time.Time
	for _, t := range q.tasks {
		if first.IsZero() || t.at.Before(first) {
			first = t.at
		}
	}
	return first, !first.IsZero()
}

// drain runs the queue until it is empty, moving the clock to each next task, but never past until.
func (tb *testBundle) drain(t testing.TB, q *fakeQueue, until time.Time) {
	t.Helper()
	ctx := context.Background()
	for range 10_000 {
		for _, id := range q.due(tb.clock.Now()) {
			require.NoError(t, tb.e.Deliver(ctx, id))
		}
		next, ok := q.next()
		if !ok {
			return
		}
		if next.After(until) {
			tb.clock.Set(until)
			return
		}
		if next.After(tb.clock.Now()) {
			tb.clock.Set(next)
		}
	}
	t.Fatal("the queue never drained")
}

// receiver is a webhook endpoint that verifies every request and records what it acknowledged.
type receiver struct {
	srv    *httptest.Server
	secret string
	clock  clock.Clock

	mu       sync.Mutex
	refuse   func(n int, now time.Time) bool // n counts requests from 1
	echo     bool                            // a refusal quotes the body it refused
	requests int
	acked    []ackedEvent
	bodies   [][]byte // of the acked events
	bad      []string
}

type ackedEvent struct {
	ID, Type, Status, BookingID, CheckinCode string
}

func newReceiver(t testing.TB, clk clock.Clock) *receiver {
	r := &receiver{clock: clk}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.requests++
		if err := webhook.Verify(r.secret, req.Header, body, r.clock.Now(), webhook.DefaultTolerance); err != nil {
			r.bad = append(r.bad, err.Error())
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.refuse != nil && r.refuse(r.requests, r.clock.Now()) {
			w.WriteHeader(http.StatusServiceUnavailable)
			if r.echo {
				_, _ = w.Write(body)
			}
			return
		}
		var ev struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Data struct {
				Status      string `json:"status"`
				BookingID   string `json:"booking_id"`
				CheckinCode string `json:"checkin_code"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &ev); err != nil || ev.ID != req.Header.Get("webhook-id") {
			r.bad = append(r.bad, "body: "+string(body))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.acked = append(r.acked, ackedEvent{ID: ev.ID, Type: ev.Type, Status: ev.Data.Status, BookingID: ev.Data.BookingID,
			CheckinCode: ev.Data.CheckinCode})
		r.bodies = append(r.bodies, body)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) got() (acked []ackedEvent, requests int, bad []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.acked), r.requests, slices.Clone(r.bad)
}

// ackedBodies are the bodies of the acknowledged events, in order.
func (r *receiver) ackedBodies() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.bodies)
}

// webhookBundle is an engine with a fake queue and one webhook endpoint for every event.
func webhookBundle(t *testing.T, mutate ...func(*Options)) (*testBundle, *fakeQueue, *receiver) {
	q := newFakeQueue()
	tb := setup(t, append([]func(*Options){func(o *Options) { o.Scheduler = q; o.DefaultGrace = 15 * time.Minute }}, mutate...)...)
	r := newReceiver(t, tb.clock)
	w, err := tb.e.CreateWebhook(context.Background(), booking.System, WebhookInput{URL: r.srv.URL + "/hook"})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(w.Secret, webhook.SecretPrefix), "the server makes the secret")
	r.secret = w.Secret
	return tb, q, r
}

// lifeOfABooking confirms a booking, lets it be released, restores it and checks it in: four events
// of one subject, in that order.
func (tb *testBundle) lifeOfABooking(t *testing.T) booking.Booking {
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	b := tb.book(t, alice, res, at("11:00"))
	tb.clock.Set(b.ReleaseAt)
	_, err := tb.e.ReleaseDue(ctx, res.VenueID)
	require.NoError(t, err)
	tb.clock.Advance(time.Minute)
	_, err = tb.e.Restore(ctx, alice, b.ID)
	require.NoError(t, err)
	_, err = tb.e.CheckIn(ctx, booking.Actor{UserID: "desk", Role: booking.RoleStaff, VenueID: res.VenueID}, b.CheckinCode)
	require.NoError(t, err)
	return b
}

var lifeEvents = []string{booking.EventConfirmed, booking.EventReleased, booking.EventRestored, booking.EventCheckedIn}

func types(acked []ackedEvent) []string {
	out := make([]string, len(acked))
	for i, a := range acked {
		out[i] = a.Type
	}
	return out
}

func uniqueIDs(acked []ackedEvent) int {
	seen := map[string]bool{}
	for _, a := range acked {
		seen[a.ID] = true
	}
	return len(seen)
}

// A receiver that fails twice and then succeeds gets every event of a booking's life once per
// webhook-id, signed, in order, the first retry within 10 s.
func TestWebhookReceiverFailingTwiceGetsEverythingOnceInOrder(t *testing.T) {
	t.Parallel()
	tb, q, r := webhookBundle(t)
	r.refuse = func(n int, _ time.Time) bool { return n <= 2 }
	b := tb.lifeOfABooking(t)
	start := tb.clock.Now()
	n, err := tb.e.RelayOutbox(context.Background())
	require.NoError(t, err)
	require.Equal(t, len(lifeEvents), n)

	for _, id := range q.due(tb.clock.Now()) {
		require.NoError(t, tb.e.Deliver(context.Background(), id))
	}
	next, ok := q.next()
	require.True(t, ok, "the refused delivery is queued again")
	require.LessOrEqual(t, next.Sub(start), 10*time.Second, "docs/API.md: the first retry within 10 s")

	tb.drain(t, q, start.Add(time.Hour))
	acked, requests, bad := r.got()
	require.Empty(t, bad, "every request was signed correctly")
	require.Equal(t, lifeEvents, types(acked), "every event once, in order")
	require.Equal(t, len(lifeEvents), uniqueIDs(acked))
	require.Equal(t, len(lifeEvents)+2, requests, "two refusals, then one request per event")
	require.Equal(t, []string{"CONFIRMED", "RELEASED", "CONFIRMED", "ARRIVED"},
		[]string{acked[0].Status, acked[1].Status, acked[2].Status, acked[3].Status}, "each event shows the state it announced")
	for _, a := range acked {
		require.Equal(t, strconv.FormatUint(b.ID, 10), a.BookingID, "%s names its booking", a.Type)
		require.Equal(t, b.CheckinCode, a.CheckinCode, "%s carries the check-in code", a.Type)
	}
}

// A receiver down for 10 minutes gets everything once it is back, still in order, and the events
// that came while it was down wait behind the first instead of overtaking it.
func TestWebhookReceiverDownTenMinutesGetsEverythingAfter(t *testing.T) {
	t.Parallel()
	tb, q, r := webhookBundle(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	b := tb.book(t, alice, res, at("11:00"))
	down := b.ReleaseAt.Add(-5 * time.Minute)
	back := down.Add(10 * time.Minute)
	r.refuse = func(_ int, now time.Time) bool { return now.Before(back) }
	tb.clock.Set(down)
	_, err := tb.e.RelayOutbox(ctx)
	require.NoError(t, err)
	tb.drain(t, q, b.ReleaseAt)

	// More of the booking's life while the receiver is down.
	_, err = tb.e.ReleaseDue(ctx, res.VenueID)
	require.NoError(t, err)
	_, err = tb.e.RelayOutbox(ctx)
	require.NoError(t, err)
	acked, _, _ := r.got()
	require.Empty(t, acked)

	tb.drain(t, q, back.Add(time.Hour))
	acked, _, bad := r.got()
	require.Empty(t, bad)
	require.Equal(t, []string{booking.EventConfirmed, booking.EventReleased}, types(acked))
	require.Equal(t, 2, uniqueIDs(acked))
	ds, _, err := tb.e.ListDeliveries(ctx, booking.System, 1, "succeeded", "", 0)
	require.NoError(t, err)
	require.Len(t, ds, 2)
	for _, d := range ds {
		require.NotNil(t, d.DoneAt)
		require.LessOrEqual(t, d.DoneAt.Sub(back), 15*time.Minute, "delivered at the first retry after the receiver returned")
		// In the offset of the event's venue, as every time the API answers.
		require.Equal(t, "Asia/Shanghai", d.CreatedAt.Location().String())
		require.Equal(t, "Asia/Shanghai", d.DoneAt.Location().String())
	}
	hooks, err := tb.e.ListWebhooks(ctx, booking.System)
	require.NoError(t, err)
	require.Len(t, hooks, 1)
	require.Equal(t, time.UTC, hooks[0].CreatedAt.Location(), "an endpoint of every venue has no venue's zone: UTC")
}

// A process that dies after the transition and before the delivery loses nothing: the relay reads
// unpublished rows after the restart, and a delivery whose task was lost is queued again.
func TestCrashBetweenTransitionAndDeliveryLosesNothing(t *testing.T) {
	t.Parallel()
	tb, q, r := webhookBundle(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	tb.book(t, alice, res, at("11:00"))

	// Died before the relay ran: a new process publishes what the old one wrote.
	tb.restart(t)
	// Died after publishing, before sending: the deliveries stay claimed by the dead process.
	tb.e.hooks.afterPublish = func() error { return errSimulatedCrash }
	_, err := tb.e.RelayOutbox(ctx)
	require.ErrorIs(t, err, errSimulatedCrash)
	tb.restart(t)
	n, err := tb.e.RelayOutbox(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "the event was published once")
	acked, _, _ := r.got()
	require.Empty(t, acked)

	// Once the dead process's claim runs out, the requeue loop queues the delivery again.
	loops := tb.e.NewLoops(LoopsConfig{})
	require.NoError(t, loops.Run(ctx, "deliveries_requeue"))
	_, ok := q.next()
	require.False(t, ok, "not while the claim holds")
	tb.clock.Advance(deliveryClaim + time.Second)
	require.NoError(t, loops.Run(ctx, "deliveries_requeue"))
	tb.drain(t, q, tb.clock.Now().Add(time.Minute))
	acked, _, _ = r.got()
	require.Equal(t, []string{booking.EventConfirmed}, types(acked))
}

// Two tasks of one delivery (a requeue racing the original) send it once.
func TestConcurrentAttemptsSendOnce(t *testing.T) {
	t.Parallel()
	tb, q, r := webhookBundle(t)
	r.refuse = func(n int, _ time.Time) bool { return n == 1 }
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	tb.book(t, alice, res, at("11:00"))
	_, err := tb.e.RelayOutbox(ctx)
	require.NoError(t, err)
	_, requests, _ := r.got()
	require.Equal(t, 1, requests, "the relay makes the first attempt itself")
	next, ok := q.next()
	require.True(t, ok)
	tb.clock.Set(next)
	ids := q.due(tb.clock.Now())
	require.Len(t, ids, 1)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { require.NoError(t, tb.e.Deliver(ctx, ids[0])) })
	}
	wg.Wait()
	acked, requests, _ := r.got()
	require.Equal(t, 2, requests)
	require.Len(t, acked, 1)
}

// A delivery refused for the whole retry schedule is failed, kept, listed, and sent again by hand.
func TestFailedDeliveryIsKeptAndRetryable(t *testing.T) {
	t.Parallel()
	tb, q, r := webhookBundle(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	tb.book(t, alice, res, at("11:00"))
	r.refuse = func(int, time.Time) bool { return true }
	start := tb.clock.Now()
	_, err := tb.e.RelayOutbox(ctx)
	require.NoError(t, err)
	tb.drain(t, q, start.Add(48*time.Hour))
	require.GreaterOrEqual(t, tb.clock.Now().Sub(start), 24*time.Hour, "retried for at least 24 h")

	failed, _, err := tb.e.ListDeliveries(ctx, booking.System, 1, "failed", "", 0)
	require.NoError(t, err)
	require.Len(t, failed, 1)
	require.Equal(t, booking.EventConfirmed, failed[0].EventType)
	require.Equal(t, http.StatusServiceUnavailable, failed[0].LastStatus)
	require.Greater(t, failed[0].Attempts, 10)

	r.refuse = nil
	d, err := tb.e.RetryDelivery(ctx, booking.System, 1, failed[0].ID)
	require.NoError(t, err)
	require.Equal(t, models.DeliveryPending, d.Status)
	tb.drain(t, q, tb.clock.Now().Add(time.Minute))
	acked, _, _ := r.got()
	require.Equal(t, []string{booking.EventConfirmed}, types(acked))
	ok, _, err := tb.e.ListDeliveries(ctx, booking.System, 1, "succeeded", "", 0)
	require.NoError(t, err)
	require.Len(t, ok, 1)
}

// A delivery sent at the first attempt (recorded with others of its batch) shows the status the
// receiver answered with, here 204, not a status of the relay's own.
func TestSentDeliveryShowsTheReceiversStatus(t *testing.T) {
	t.Parallel()
	tb, q, r := webhookBundle(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	tb.book(t, alice, res, at("11:00"))
	start := tb.clock.Now()
	_, err := tb.e.RelayOutbox(ctx)
	require.NoError(t, err)
	tb.drain(t, q, start.Add(time.Minute))
	acked, _, _ := r.got()
	require.NotEmpty(t, acked)
	sent, _, err := tb.e.ListDeliveries(ctx, booking.System, 1, "succeeded", "", 0)
	require.NoError(t, err)
	require.Len(t, sent, len(acked))
	for _, d := range sent {
		require.Equal(t, 1, d.Attempts, "delivery %d", d.ID)
		require.Equal(t, http.StatusNoContent, d.LastStatus, "delivery %d", d.ID)
	}
}

// Endpoints take only http(s) URLs, only the event types they name and only their venue's events.
func TestWebhookEndpointsFilter(t *testing.T) {
	t.Parallel()
	q := newFakeQueue()
	tb := setup(t, func(o *Options) { o.Scheduler = q })
	ctx := context.Background()
	for _, bad := range []string{"ftp://example.com/hook", "file:///etc/passwd", "example.com/hook", "http://user:pw@example.com/"} {
		_, err := tb.e.CreateWebhook(ctx, booking.System, WebhookInput{URL: bad})
		require.ErrorIs(t, err, booking.Invalid("invalid_url", ""), bad)
	}
	_, err := tb.e.CreateWebhook(ctx, booking.System, WebhookInput{URL: "https://example.com/", EventTypes: []string{"booking.nothing"}})
	require.ErrorIs(t, err, booking.Invalid("invalid_event_type", ""))
	_, err = tb.e.CreateWebhook(ctx, alice, WebhookInput{URL: "https://example.com/"})
	require.ErrorIs(t, err, booking.ErrForbidden)

	res := tb.resource(t, 1, 60, "08:00", "22:00")
	other := tb.resource(t, 1, 60, "08:00", "22:00")
	released := newReceiver(t, tb.clock)
	w, err := tb.e.CreateWebhook(ctx, booking.System, WebhookInput{URL: released.srv.URL, EventTypes: []string{booking.EventReleased},
		VenueID: res.VenueID})
	require.NoError(t, err)
	require.Equal(t, "Asia/Shanghai", w.CreatedAt.Location().String(), "an endpoint of one venue is shown in its zone")
	released.secret = w.Secret
	b := tb.book(t, alice, res, at("11:00"))
	tb.book(t, alice, other, at("11:00"))
	tb.clock.Set(b.ReleaseAt)
	_, err = tb.e.ReleaseDue(ctx, 0)
	require.NoError(t, err)
	_, err = tb.e.RelayOutbox(ctx)
	require.NoError(t, err)
	tb.drain(t, q, tb.clock.Now().Add(time.Minute))
	acked, _, _ := released.got()
	require.Equal(t, []string{booking.EventReleased}, types(acked), "one venue's releases only")

	gone, err := tb.e.DeleteWebhook(ctx, booking.System, w.ID)
	require.NoError(t, err)
	require.Empty(t, gone.Secret, "the secret is shown once")
	_, err = tb.e.DeleteWebhook(ctx, booking.System, w.ID)
	require.ErrorIs(t, err, booking.ErrNotFound)
}

// WeChat users get the subscribe message of an event with a template — the template's keys mapped
// to the booking's fields, addressed to their openid — for a release and a reminder, and nothing
// for a booking checked in.
func TestWechatSubscribeMessages(t *testing.T) {
	t.Parallel()
	fake := wechatfake.New(t, "wx-app", "wx-secret")
	q := newFakeQueue()
	tb := setup(t, func(o *Options) {
		o.Scheduler = q
		o.Notify.Wechat = &wechatmsg.Client{AppID: "wx-app", Secret: "wx-secret", APIBase: fake.URL, HTTP: fake.Client()}
	})
	ctx := context.Background()
	for _, typ := range []string{booking.EventReleased, booking.EventReminder} {
		_, err := tb.e.SetWechatTemplate(ctx, booking.System, WechatTemplate{EventType: typ, TemplateID: "tpl-" + typ, Page: "pages/booking",
			Data: map[string]string{"thing1": "resource_name", "time2": "start", "character_string3": "checkin_code"}})
		require.NoError(t, err)
	}
	_, err := tb.e.SetWechatTemplate(ctx, booking.System, WechatTemplate{EventType: booking.EventReleased, TemplateID: "x",
		Data: map[string]string{"thing1": "password"}})
	require.ErrorIs(t, err, booking.Invalid("invalid_template_data", ""))

	res := tb.resource(t, 2, 60, "08:00", "22:00")
	wx := booking.Actor{UserID: booking.WechatUserID("o-alice"), Role: booking.RoleUser}
	wxBob := booking.Actor{UserID: booking.WechatUserID("o-bob"), Role: booking.RoleUser}
	noShow := tb.book(t, wx, res, at("11:00"))
	arrived := tb.book(t, wxBob, res, at("11:00"))
	tb.book(t, alice, res, at("14:00")) // not a WeChat user: no message
	staff := booking.Actor{UserID: "desk", Role: booking.RoleStaff, VenueID: res.VenueID}
	tb.clock.Set(at("10:40"))
	_, err = tb.e.CheckIn(ctx, staff, arrived.CheckinCode)
	require.NoError(t, err)
	tb.clock.Set(noShow.ReleaseAt.Add(-15 * time.Minute)) // the reminder lead
	require.NoError(t, tb.e.NewLoops(LoopsConfig{}).Run(ctx, "reminders"))
	tb.clock.Set(noShow.ReleaseAt)
	_, err = tb.e.ReleaseDue(ctx, res.VenueID)
	require.NoError(t, err)
	_, err = tb.e.RelayOutbox(ctx)
	require.NoError(t, err)
	tb.drain(t, q, tb.clock.Now().Add(time.Minute))

	msgs := fake.Messages()
	var got []string
	for _, m := range msgs {
		got = append(got, m.ToUser+" "+m.TemplateID)
		require.Equal(t, "pages/booking", m.Page)
		require.Equal(t, "R", m.Data["thing1"])
		require.Equal(t, "2026-12-07 11:00", m.Data["time2"], "venue-local time")
		require.Equal(t, noShow.CheckinCode, m.Data["character_string3"])
	}
	require.Equal(t, []string{"o-alice tpl-" + booking.EventReminder, "o-alice tpl-" + booking.EventReleased}, got,
		"a reminder and a release for the no-show; nothing for the guest who checked in before the reminder")
}

// The venue's release mode: dry_run keeps its no-shows CONFIRMED and announces
// booking.release_skipped; off decides nothing and says nothing; back on, only bookings whose
// release_at is still ahead are released. Metrics count each.
func TestReleaseModes(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 3, 60, "08:00", "22:00")
	counts := func() (released, dry, off float64) {
		outcome := func(o string) float64 {
			return releaseSeries(t, "slotwheel_releases_total", map[string]string{"outcome": o})
		}
		return outcome("released"), outcome("held_dry_run"), outcome("held_off")
	}
	rel0, dry0, off0 := counts()

	_, err := tb.e.SetReleaseMode(ctx, alice, res.VenueID, "off")
	require.ErrorIs(t, err, booking.ErrForbidden)
	v, err := tb.e.SetReleaseMode(ctx, booking.System, res.VenueID, "dry_run")
	require.NoError(t, err)
	require.Equal(t, "dry_run", v.ReleaseMode)
	dry := tb.book(t, alice, res, at("11:00"))
	tb.clock.Set(dry.ReleaseAt)
	n, err := tb.e.ReleaseDue(ctx, res.VenueID)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got, err := tb.e.GetBooking(ctx, alice, dry.ID)
	require.NoError(t, err)
	require.Equal(t, booking.Confirmed, got.Status, "dry_run keeps the booking")
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, at("11:00")), "and its units")
	require.Equal(t, []string{"booking:" + strconv.FormatUint(dry.ID, 10)}, tb.events(t, booking.EventReleaseSkipped))

	_, err = tb.e.SetReleaseMode(ctx, booking.System, res.VenueID, "off")
	require.NoError(t, err)
	off := tb.book(t, alice, res, at("12:00"))
	tb.clock.Set(off.ReleaseAt)
	_, err = tb.e.ReleaseDue(ctx, res.VenueID)
	require.NoError(t, err)
	got, err = tb.e.GetBooking(ctx, alice, off.ID)
	require.NoError(t, err)
	require.Equal(t, booking.Confirmed, got.Status)
	require.Len(t, tb.events(t, booking.EventReleaseSkipped), 1, "off announces nothing")
	// A guest of a booking held back may still arrive until its end.
	tb.clock.Set(at("12:59"))
	_, err = tb.e.CheckIn(ctx, booking.Actor{UserID: "desk", Role: booking.RoleStaff, VenueID: res.VenueID}, off.CheckinCode)
	require.NoError(t, err)

	ahead := tb.book(t, alice, res, at("13:00"))
	_, err = tb.e.SetReleaseMode(ctx, booking.System, res.VenueID, "on")
	require.NoError(t, err)
	tb.clock.Set(ahead.ReleaseAt)
	_, err = tb.e.ReleaseDue(ctx, res.VenueID)
	require.NoError(t, err)
	for id, want := range map[uint64]booking.Status{dry.ID: booking.Confirmed, ahead.ID: booking.Released} {
		got, err := tb.e.GetBooking(ctx, alice, id)
		require.NoError(t, err)
		require.Equal(t, want, got.Status, "booking %d: only the one whose release_at was still ahead is released", id)
	}

	rel1, dry1, off1 := counts()
	require.Equal(t, 1.0, dry1-dry0)
	require.Equal(t, 1.0, off1-off0)
	require.GreaterOrEqual(t, rel1-rel0, 1.0)
	_, err = tb.e.SetReleaseMode(ctx, booking.System, res.VenueID, "sometimes")
	require.ErrorIs(t, err, booking.Invalid("invalid_release_mode", ""))
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
