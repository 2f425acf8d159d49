package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/api/internal/request"
	"github.com/slotwheel/slotwheel/engine/booking"
)

// These targets send fuzzed bodies through the whole handler to a real engine (the test's own
// backends). Every answer must be the contract's (harness.do validates it against openapi.json): never
// a 5xx, an error body with a code for every refusal. Placeholders in a body are replaced first, so
// that the fuzzer works close to requests that pass: {start} and {end} (an hour of tomorrow, RFC 3339
// in the venue's offset), {date} (tomorrow), {res} and {res2} (two resources), {svc} (a service of
// the first), {roles} (a service with a role on each) and {venue}.

// fuzzHarness is a harness with a service of its resource, and a service with two roles.
type fuzzHarness struct {
	*harness
	user             string // a user's token
	svc, roles, res2 string
}

func newFuzzHarness(f *testing.F) *fuzzHarness {
	hs := newHarness(f)
	fh := &fuzzHarness{harness: hs, user: hs.token("fuzzer", booking.RoleUser, 0), res2: hs.newResource(2)}
	var svc serviceResponse
	hs.do(http.MethodPost, "/api/v1/admin/services", hs.admin, map[string]any{"venue_id": hs.venue, "name": "Lesson",
		"duration_minutes": 60, "prep_minutes": 10, "resource_ids": []string{hs.res}, "price_cents": 900}).
		expect(f, http.StatusCreated).decode(f, &svc)
	fh.svc = svc.ServiceID
	// Role names may hold any text: the hold record must keep them apart all the same.
	hs.do(http.MethodPost, "/api/v1/admin/services", hs.admin, map[string]any{"venue_id": hs.venue, "name": "Coached court",
		"duration_minutes": 60, "roles": []map[string]any{{"role": "coach, senior", "resource_ids": []string{hs.res}},
			{"role": "court=1", "resource_ids": []string{fh.res2}}}, "price_cents": 1500}).
		expect(f, http.StatusCreated).decode(f, &svc)
	fh.roles = svc.ServiceID
	return fh
}

// with returns the harness for one exec: its checks report to t.
func (fh *fuzzHarness) with(t *testing.T) *fuzzHarness {
	hs := *fh.harness
	hs.t = t
	c := *fh
	c.harness = &hs
	return &c
}

// expand replaces the placeholders of body, with {start} at hour (venue-local) tomorrow.
func (fh *fuzzHarness) expand(body string, hour uint8) string {
	start, end := fh.slot(1, int(hour%24))
	return strings.NewReplacer("{start}", start, "{end}", end, "{date}", start[:10], "{res}", fh.res, "{res2}", fh.res2,
		"{svc}", fh.svc, "{roles}", fh.roles, "{venue}", fh.venue).Replace(body)
}

// refused checks an answer that is not a 2xx: a client error with a code, never a server error.
func refused(t *testing.T, r reply, body string) {
	t.Helper()
	require.Less(t, r.Status, 500, "%s answered %d: %s", body, r.Status, r.Body)
	require.GreaterOrEqual(t, r.Status, 400, "%s answered %d: %s", body, r.Status, r.Body)
	require.NotEmpty(t, r.errorCode(), "%s answered %d without a code", body, r.Status)
}

// FuzzHoldRequest posts hold bodies as a user. Beyond the contract: a hold made is the one asked for
// — its start, its end when one was given, its quantity, its service — and can be given up (which
// also frees its units for the next exec).
func FuzzHoldRequest(f *testing.F) {
	fh := newFuzzHarness(f)
	f.Fuzz(func(t *testing.T, body string, hour uint8) {
		h := fh.with(t)
		raw := h.expand(body, hour)
		r := h.do(http.MethodPost, "/api/v1/holds", h.user, raw)
		if r.Status != http.StatusCreated {
			refused(t, r, raw)
			return
		}
		var got holdResponse
		r.decode(t, &got)
		var req holdRequest
		require.NoError(t, request.Decode([]byte(raw), &req), "%s made a hold but does not decode", raw)
		start, err := time.Parse(time.RFC3339, got.Start)
		require.NoError(t, err)
		require.True(t, start.Equal(req.Start.Time), "asked %v, held %s", req.Start.Time, got.Start)
		if req.End != nil {
			require.True(t, req.End.Equal(mustTime(t, got.End)), "asked to end at %v, held until %s", req.End.Time, got.End)
		}
		require.Equal(t, max(request.Deref(req.Quantity), 1), got.Quantity)
		if req.ServiceID != nil {
			require.Equal(t, formatID(uint64(*req.ServiceID)), got.ServiceID)
		}
		if req.ServiceID != nil && formatID(uint64(*req.ServiceID)) == h.roles {
			require.Len(t, got.Resources, 2, "a hold of the service with roles names a resource for each")
			require.Equal(t, h.res, got.Resources["coach, senior"])
			require.Equal(t, h.res2, got.Resources["court=1"])
		}
		h.do(http.MethodDelete, "/api/v1/holds/"+got.HoldID, h.user, nil).expect(t, http.StatusOK)
	})
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return v
}

// adminRoutes are the admin writes FuzzAdminRequest picks from; {res2} in a path is the harness's
// second resource, whose schedule and rules the fuzzer may change at will.
var adminRoutes = []struct{ method, path string }{
	{http.MethodPut, "/api/v1/admin/resources/{res2}/schedule"},
	{http.MethodPut, "/api/v1/admin/resources/{res2}/policy"},
	{http.MethodPut, "/api/v1/admin/policies/grace"},
	{http.MethodPut, "/api/v1/admin/policies/noshow"},
	{http.MethodPost, "/api/v1/admin/services"},
	{http.MethodPost, "/api/v1/admin/resources"},
	{http.MethodPost, "/api/v1/admin/venues"},
}

// FuzzAdminRequest sends admin writes — schedules, booking rules, grace and no-show policies,
// services, resources, venues — and then uses what they left: whatever was accepted, availability of
// the second resource answers 200, and a hold on it answers within the contract (and is given up).
func FuzzAdminRequest(f *testing.F) {
	fh := newFuzzHarness(f)
	f.Fuzz(func(t *testing.T, route uint8, body string, hour uint8) {
		h := fh.with(t)
		rt := adminRoutes[int(route)%len(adminRoutes)]
		raw := h.expand(body, hour)
		r := h.do(rt.method, strings.ReplaceAll(rt.path, "{res2}", h.res2), h.admin, raw)
		if r.Status >= 300 {
			refused(t, r, raw)
		}

		start, end := h.slot(1, int(hour%24))
		h.do(http.MethodGet, "/api/v1/availability?resource_id="+h.res2+"&date="+start[:10], "", nil).expect(t, http.StatusOK)
		hold := h.do(http.MethodPost, "/api/v1/holds", h.user, map[string]any{"resource_id": h.res2, "start": start, "end": end})
		if hold.Status != http.StatusCreated {
			refused(t, hold, "a hold after "+raw)
			return
		}
		var got holdResponse
		hold.decode(t, &got)
		h.do(http.MethodDelete, "/api/v1/holds/"+got.HoldID, h.user, nil).expect(t, http.StatusOK)
	})
}
