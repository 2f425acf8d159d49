package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// The admin routes of "Events and webhooks": an endpoint is created with a server-made secret shown
// once, listed without it, its deliveries listed and retried, and deleted; templates are stored and
// listed; the release mode is set per venue and shown with it. Every answer is checked against
// openapi.json by the harness.
func TestEventRoutes(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)

	var w webhookResponse
	hs.do(http.MethodPost, "/api/v1/admin/webhooks", hs.admin, set{"url": "https://127.0.0.1:9/slotwheel",
		"event_types": []string{"booking.released", "booking.confirmed"}, "venue_id": hs.venue}).
		expect(t, http.StatusCreated).decode(t, &w)
	require.True(t, strings.HasPrefix(w.Secret, "whsec_"), "the server makes the secret")
	require.Equal(t, hs.venue, *w.VenueID)

	var all webhookResponse
	hs.do(http.MethodPost, "/api/v1/admin/webhooks", hs.admin, set{"url": "http://127.0.0.1:9/all", "venue_id": ""}).
		expect(t, http.StatusCreated).decode(t, &all)
	require.Nil(t, all.VenueID, "every venue")
	require.Empty(t, all.EventTypes, "every type")
	require.NotEqual(t, w.Secret, all.Secret)

	var list listResponse[webhookResponse]
	hs.do(http.MethodGet, "/api/v1/admin/webhooks", hs.admin, nil).expect(t, http.StatusOK).decode(t, &list)
	require.Len(t, list.Items, 2)
	for _, it := range list.Items {
		require.Empty(t, it.Secret, "the secret is shown once")
	}

	// A booking makes an event; its delivery to the unreachable endpoint is listed and retryable.
	hs.booking(alice, 1, 11)
	_, err := hs.eng.RelayOutbox(t.Context())
	require.NoError(t, err)
	var ds listResponse[deliveryResponse]
	hs.do(http.MethodGet, "/api/v1/admin/webhooks/"+all.WebhookID+"/deliveries", hs.admin, nil).
		expect(t, http.StatusOK).decode(t, &ds)
	require.Len(t, ds.Items, 1)
	d := ds.Items[0]
	require.Equal(t, "booking.confirmed", d.EventType)
	require.Equal(t, "pending", d.Status, "refused, to be retried")
	require.Equal(t, 1, d.Attempts)
	require.NotNil(t, d.NextAttemptAt)
	require.True(t, strings.HasPrefix(d.EventID, "evt_"))
	hs.do(http.MethodGet, "/api/v1/admin/webhooks/"+all.WebhookID+"/deliveries?status=failed", hs.admin, nil).
		expect(t, http.StatusOK).decode(t, &ds)
	require.Empty(t, ds.Items)
	r := hs.do(http.MethodGet, "/api/v1/admin/webhooks/"+all.WebhookID+"/deliveries?status=lost", hs.admin, nil)
	require.Equal(t, http.StatusUnprocessableEntity, r.Status)
	require.Equal(t, "invalid_status", r.errorCode())
	var retried deliveryResponse
	hs.do(http.MethodPost, "/api/v1/admin/webhooks/"+all.WebhookID+"/deliveries/"+d.DeliveryID+"/retry", hs.admin, nil).
		expect(t, http.StatusOK).decode(t, &retried)
	require.Equal(t, "pending", retried.Status)
	hs.do(http.MethodPost, "/api/v1/admin/webhooks/"+w.WebhookID+"/deliveries/"+d.DeliveryID+"/retry", hs.admin, nil).
		expect(t, http.StatusNotFound)

	var gone webhookResponse
	hs.do(http.MethodDelete, "/api/v1/admin/webhooks/"+all.WebhookID, hs.admin, nil).expect(t, http.StatusOK).decode(t, &gone)
	require.Equal(t, all.WebhookID, gone.WebhookID)
	hs.do(http.MethodDelete, "/api/v1/admin/webhooks/"+all.WebhookID, hs.admin, nil).expect(t, http.StatusNotFound)
	hs.do(http.MethodGet, "/api/v1/admin/webhooks/"+all.WebhookID+"/deliveries?status=skipped", hs.admin, nil).
		expect(t, http.StatusOK).decode(t, &ds)
	require.Len(t, ds.Items, 1, "what still waited for a deleted endpoint is skipped")

	var tpl wechatTemplateResponse
	hs.do(http.MethodPut, "/api/v1/admin/notifications/wechat", hs.admin, set{"event_type": "booking.reminder",
		"template_id": "tpl-1", "page": "pages/booking/index", "data": set{"thing1": "venue_name", "time2": "start"}}).
		expect(t, http.StatusOK).decode(t, &tpl)
	require.Equal(t, "venue_name", tpl.Data["thing1"])
	var tpls listResponse[wechatTemplateResponse]
	hs.do(http.MethodGet, "/api/v1/admin/notifications/wechat", hs.admin, nil).expect(t, http.StatusOK).decode(t, &tpls)
	require.Len(t, tpls.Items, 1)

	var v venueResponse
	hs.do(http.MethodPut, "/api/v1/admin/venues/"+hs.venue+"/release-mode", hs.admin, set{"mode": "dry_run"}).
		expect(t, http.StatusOK).decode(t, &v)
	require.Equal(t, "dry_run", v.ReleaseMode)
	var venues listResponse[venueResponse]
	hs.do(http.MethodGet, "/api/v1/venues", "", nil).expect(t, http.StatusOK).decode(t, &venues)
	require.Equal(t, "dry_run", venues.Items[0].ReleaseMode)
	hs.do(http.MethodPut, "/api/v1/admin/venues/999999/release-mode", hs.admin, set{"mode": "on"}).expect(t, http.StatusNotFound)
}

// With SLOTWHEEL_CORS_ORIGINS set, a listed origin's preflight is answered and its answers carry the
// headers a browser needs; another origin gets none, and without the setting nothing changes.
func TestCORS(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, withOptions(func(o *Options) { o.CORSOrigins = []string{"https://admin.example.com"} }))
	pre := hs.do(http.MethodOptions, "/api/v1/holds", "", nil, header{"Origin", "https://admin.example.com"},
		header{"Access-Control-Request-Method", "POST"}, header{"Access-Control-Request-Headers", "authorization, idempotency-key"})
	require.Equal(t, http.StatusNoContent, pre.Status)
	require.Equal(t, "https://admin.example.com", pre.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, pre.Header.Get("Access-Control-Allow-Headers"), "Idempotency-Key")
	require.Contains(t, pre.Header.Get("Access-Control-Allow-Methods"), "POST")

	get := hs.do(http.MethodGet, "/api/v1/venues", "", nil, header{"Origin", "https://admin.example.com"})
	require.Equal(t, http.StatusOK, get.Status)
	require.Equal(t, "https://admin.example.com", get.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, get.Header.Get("Access-Control-Expose-Headers"), "X-Request-Id")

	other := hs.do(http.MethodGet, "/api/v1/venues", "", nil, header{"Origin", "https://evil.example.com"})
	require.Empty(t, other.Header.Get("Access-Control-Allow-Origin"))
	otherPre := hs.do(http.MethodOptions, "/api/v1/holds", "", nil, header{"Origin", "https://evil.example.com"},
		header{"Access-Control-Request-Method", "POST"})
	require.Empty(t, otherPre.Header.Get("Access-Control-Allow-Origin"))

	off := newHarness(t)
	r := off.do(http.MethodGet, "/api/v1/venues", "", nil, header{"Origin", "https://admin.example.com"})
	require.Empty(t, r.Header.Get("Access-Control-Allow-Origin"), "CORS is off by default")
}
