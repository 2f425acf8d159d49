package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/release"
)

// TestNobodyReachesWhatIsNotTheirs: another user gets 403 or 404 on every route that names alice's
// hold or booking, never a 2xx, and nothing changes.
func TestNobodyReachesWhatIsNotTheirs(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	bob := hs.token("bob", booking.RoleUser, 0)
	otherStaff := hs.token("olga", booking.RoleStaff, hs.venueNum()+1000)
	held := hs.hold(alice, 1, 9)
	booked := hs.booking(alice, 1, 11)

	for _, tok := range []string{bob, otherStaff} {
		for _, rt := range []struct{ method, path string }{
			{"GET", "/api/v1/holds/" + held.HoldID},
			{"DELETE", "/api/v1/holds/" + held.HoldID},
			{"POST", "/api/v1/holds/" + held.HoldID + "/confirm"},
			{"GET", "/api/v1/bookings/" + booked.BookingID},
			{"POST", "/api/v1/bookings/" + booked.BookingID + "/cancel"},
			{"POST", "/api/v1/bookings/" + booked.BookingID + "/restore"},
		} {
			r := hs.do(rt.method, rt.path, tok, nil)
			require.Contains(t, []int{http.StatusForbidden, http.StatusNotFound}, r.Status, "%s %s: %s", rt.method, rt.path, r.Body)
		}
		// Staff of another venue cannot check alice in either.
		r := hs.do(http.MethodPost, "/api/v1/checkins", otherStaff, set{"checkin_code": booked.CheckinCode})
		require.Contains(t, []int{http.StatusForbidden, http.StatusNotFound}, r.Status, "%s", r.Body)
	}

	// Lists show only one's own.
	var holds listResponse[holdResponse]
	hs.do(http.MethodGet, "/api/v1/holds", bob, nil).expect(t, http.StatusOK).decode(t, &holds)
	require.Empty(t, holds.Items)
	var bookings listResponse[bookingResponse]
	hs.do(http.MethodGet, "/api/v1/bookings", bob, nil).expect(t, http.StatusOK).decode(t, &bookings)
	require.Empty(t, bookings.Items)
	hs.do(http.MethodGet, "/api/v1/holds", alice, nil).expect(t, http.StatusOK).decode(t, &holds)
	require.Len(t, holds.Items, 2) // the open hold and the confirmed one
	hs.do(http.MethodGet, "/api/v1/bookings", alice, nil).expect(t, http.StatusOK).decode(t, &bookings)
	require.Len(t, bookings.Items, 1)
	require.Equal(t, booked.BookingID, bookings.Items[0].BookingID)

	// Alice's things are untouched, and she and an admin can read them.
	var h holdResponse
	hs.do(http.MethodGet, "/api/v1/holds/"+held.HoldID, alice, nil).expect(t, http.StatusOK).decode(t, &h)
	require.Equal(t, string(booking.HoldHeld), h.Status)
	hs.do(http.MethodGet, "/api/v1/holds/"+held.HoldID, hs.admin, nil).expect(t, http.StatusOK)
	var b bookingResponse
	hs.do(http.MethodGet, "/api/v1/bookings/"+booked.BookingID, hs.admin, nil).expect(t, http.StatusOK).decode(t, &b)
	require.Equal(t, "CONFIRMED", b.Status)
}

// TestRolesAndTokens: no token is 401 everywhere a token is needed, bad tokens are 401, user and
// staff tokens on admin routes are 403, staff may check in at their venue.
func TestRolesAndTokens(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	staff := hs.token("sam", booking.RoleStaff, hs.venueNum())
	booked := hs.booking(alice, 1, 11)

	admin := []struct{ method, path string }{
		{"POST", "/api/v1/admin/venues"},
		{"POST", "/api/v1/admin/resources"},
		{"PUT", "/api/v1/admin/resources/" + hs.res + "/schedule"},
		{"POST", "/api/v1/admin/services"},
		{"PUT", "/api/v1/admin/policies/grace"},
		{"PUT", "/api/v1/admin/venues/" + hs.venue + "/release-mode"},
		{"POST", "/api/v1/admin/webhooks"},
		{"GET", "/api/v1/admin/webhooks"},
		{"DELETE", "/api/v1/admin/webhooks/1"},
		{"GET", "/api/v1/admin/webhooks/1/deliveries"},
		{"POST", "/api/v1/admin/webhooks/1/deliveries/1/retry"},
		{"PUT", "/api/v1/admin/notifications/wechat"},
		{"GET", "/api/v1/admin/notifications/wechat"},
	}
	authenticated := append([]struct{ method, path string }{
		{"POST", "/api/v1/holds"},
		{"GET", "/api/v1/holds"},
		{"GET", "/api/v1/holds/h1_00000000000000000000"},
		{"DELETE", "/api/v1/holds/h1_00000000000000000000"},
		{"POST", "/api/v1/holds/h1_00000000000000000000/confirm"},
		{"GET", "/api/v1/bookings"},
		{"GET", "/api/v1/bookings/1"},
		{"POST", "/api/v1/bookings/1/cancel"},
		{"POST", "/api/v1/bookings/1/restore"},
		{"POST", "/api/v1/checkins"},
		{"POST", "/api/v1/waitlist"},
		{"DELETE", "/api/v1/waitlist/1"},
	}, admin...)

	bad := map[string]string{
		"garbage":      "not.a.token",
		"wrong secret": signWith(t, []byte("another-secret"), jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "role": "user", "exp": hs.clock.Now().Add(time.Hour).Unix()}),
		"expired":      signWith(t, testJWTSecret, jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "role": "user", "exp": hs.clock.Now().Add(-time.Minute).Unix()}),
		"no exp":       signWith(t, testJWTSecret, jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "role": "user"}),
		"no sub":       signWith(t, testJWTSecret, jwt.SigningMethodHS256, jwt.MapClaims{"role": "admin", "exp": hs.clock.Now().Add(time.Hour).Unix()}),
		"unknown role": signWith(t, testJWTSecret, jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "role": "root", "exp": hs.clock.Now().Add(time.Hour).Unix()}),
		"staff no venue": signWith(t, testJWTSecret, jwt.SigningMethodHS256,
			jwt.MapClaims{"sub": "sam", "role": "staff", "exp": hs.clock.Now().Add(time.Hour).Unix()}),
		"HS512": signWith(t, testJWTSecret, jwt.SigningMethodHS512, jwt.MapClaims{"sub": "alice", "role": "admin", "exp": hs.clock.Now().Add(time.Hour).Unix()}),
		"alg none": signWith(t, jwt.UnsafeAllowNoneSignatureType, jwt.SigningMethodNone,
			jwt.MapClaims{"sub": "alice", "role": "admin", "exp": hs.clock.Now().Add(time.Hour).Unix()}),
	}

	for _, rt := range authenticated {
		r := hs.do(rt.method, rt.path, "", nil)
		require.Equal(t, http.StatusUnauthorized, r.Status, "%s %s without a token: %s", rt.method, rt.path, r.Body)
		require.Equal(t, "unauthorized", r.errorCode())
		require.Contains(t, r.Header.Get("WWW-Authenticate"), "Bearer")
		for name, tok := range bad {
			r := hs.do(rt.method, rt.path, tok, nil)
			require.Equal(t, http.StatusUnauthorized, r.Status, "%s %s with a %s token: %s", rt.method, rt.path, name, r.Body)
		}
		r = hs.do(rt.method, rt.path, "", nil, header{"Authorization", "Basic YWRtaW46ZGFzaC1wYXNz"})
		require.Equal(t, http.StatusUnauthorized, r.Status, "Basic is for the dashboard only")
	}
	for _, rt := range admin {
		for _, tok := range []string{alice, staff} {
			r := hs.do(rt.method, rt.path, tok, set{})
			require.Equal(t, http.StatusForbidden, r.Status, "%s %s: %s", rt.method, rt.path, r.Body)
			require.Equal(t, "forbidden", r.errorCode())
		}
	}

	// A user cannot check in; staff of the venue can try (and it is too early yet).
	r := hs.do(http.MethodPost, "/api/v1/checkins", alice, set{"checkin_code": booked.CheckinCode}).expect(t, http.StatusForbidden)
	require.Equal(t, "forbidden", r.errorCode())
	r = hs.do(http.MethodPost, "/api/v1/checkins", staff, set{"checkin_code": booked.CheckinCode}).expect(t, http.StatusConflict)
	require.Equal(t, "too_early", r.errorCode())
	var early answer.Body
	r.decode(t, &early)
	opens, _ := early.Error.Details["opens_at"].(string)
	require.Equal(t, booked.Start[len(booked.Start)-6:], opens[len(opens)-6:], "opens_at is in the venue's offset, as the start: %s", opens)
	// Staff see their venue's bookings.
	hs.do(http.MethodGet, "/api/v1/bookings/"+booked.BookingID, staff, nil).expect(t, http.StatusOK)

	// Ten minutes before the start check-in is open. (Tokens are minted again: the clock moved.)
	start, err := time.Parse(time.RFC3339, booked.Start)
	require.NoError(t, err)
	hs.clock.Set(start.Add(-10 * time.Minute))
	staff = hs.token("sam", booking.RoleStaff, hs.venueNum())
	var b bookingResponse
	hs.do(http.MethodPost, "/api/v1/checkins", staff, set{"checkin_code": booked.CheckinCode}).expect(t, http.StatusOK).decode(t, &b)
	require.Equal(t, "ARRIVED", b.Status)
	require.NotEmpty(t, b.CheckedInAt)
	require.Equal(t, "+08:00", b.Start[len(b.Start)-6:], "times are in the venue's offset")
}

func signWith(t *testing.T, key any, m jwt.SigningMethod, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	require.NoError(t, err)
	return s
}

func TestDashboardGuard(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	staff := hs.token("sam", booking.RoleStaff, hs.venueNum())

	for _, path := range []string{"/monitoring/", "/monitoring/api/queues", "/monitoring"} {
		r := hs.do(http.MethodGet, path, "", nil).expect(t, http.StatusUnauthorized)
		require.Equal(t, `Basic realm="slotwheel"`, r.Header.Get("WWW-Authenticate"))
		require.Equal(t, "unauthorized", r.errorCode())
		hs.do(http.MethodGet, path, alice, nil).expect(t, http.StatusForbidden)
		hs.do(http.MethodGet, path, staff, nil).expect(t, http.StatusForbidden)
		hs.do(http.MethodGet, path, "", nil, basic("admin", "wrong")).expect(t, http.StatusUnauthorized)
		hs.do(http.MethodGet, path, "", nil, basic("root", "dash-pass")).expect(t, http.StatusUnauthorized)
		hs.do(http.MethodGet, path, "not.a.token", nil).expect(t, http.StatusUnauthorized)
	}
	r := hs.do(http.MethodGet, "/monitoring", hs.admin, nil).expect(t, http.StatusMovedPermanently)
	require.Equal(t, "/monitoring/", r.Header.Get("Location"))
	r = hs.do(http.MethodGet, "/monitoring/", hs.admin, nil).expect(t, http.StatusOK)
	require.Contains(t, string(r.Body), "<html")
	hs.do(http.MethodGet, "/monitoring/", "", nil, basic("admin", "dash-pass")).expect(t, http.StatusOK)
	r = hs.do(http.MethodGet, "/monitoring/api/queues", hs.admin, nil).expect(t, http.StatusOK)
	require.True(t, json.Valid(r.Body), "%s", r.Body)

	// Without a dashboard password, Basic never opens it; an admin token still does.
	nopass := newHarness(t, withOptions(func(o *Options) { o.DashboardPassword = "" }))
	nopass.do(http.MethodGet, "/monitoring/", "", nil, basic("admin", "")).expect(t, http.StatusUnauthorized)
	nopass.do(http.MethodGet, "/monitoring/", nopass.admin, nil).expect(t, http.StatusOK)

	// Without a queue there is no dashboard.
	none := newHarness(t, withOptions(func(o *Options) { o.Asynq = nil }))
	none.do(http.MethodGet, "/monitoring/", none.admin, nil).expect(t, http.StatusNotFound)
}

func basic(user, pass string) header {
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.SetBasicAuth(user, pass)
	return header{"Authorization", req.Header.Get("Authorization")}
}

func TestDevLogin(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)

	var tok tokenResponse
	hs.do(http.MethodPost, "/api/v1/auth/dev-login", "", set{"user_id": "dora"}).expect(t, http.StatusOK).decode(t, &tok)
	require.NotEmpty(t, tok.Token)
	hs.do(http.MethodGet, "/api/v1/holds", tok.Token, nil).expect(t, http.StatusOK)
	hs.do(http.MethodPost, "/api/v1/admin/venues", tok.Token, set{"name": "x", "timezone": testZone}).expect(t, http.StatusForbidden)

	// A staff token carries its venue (as a string claim) and reads that venue's bookings by id; its
	// list is its own ("mine"), so a desk account does not list guests' check-in codes.
	alice := hs.token("alice", booking.RoleUser, 0)
	booked := hs.booking(alice, 2, 10)
	hs.do(http.MethodPost, "/api/v1/auth/dev-login", "", set{"user_id": "sam", "role": "staff", "venue_id": hs.venue}).
		expect(t, http.StatusOK).decode(t, &tok)
	hs.do(http.MethodGet, "/api/v1/bookings/"+booked.BookingID, tok.Token, nil).expect(t, http.StatusOK)
	var bookings listResponse[bookingResponse]
	hs.do(http.MethodGet, "/api/v1/bookings", tok.Token, nil).expect(t, http.StatusOK).decode(t, &bookings)
	require.Empty(t, bookings.Items)

	// Tokens last 24 hours.
	exp, err := time.Parse(time.RFC3339, tok.ExpiresAt)
	require.NoError(t, err)
	require.WithinDuration(t, hs.clock.Now().Add(24*time.Hour), exp, time.Second)
	hs.clock.Advance(24*time.Hour + time.Second)
	hs.do(http.MethodGet, "/api/v1/bookings", tok.Token, nil).expect(t, http.StatusUnauthorized)

	// Off: the route does not exist.
	off := newHarness(t, withOptions(func(o *Options) { o.DevLogin = false }))
	r := off.do(http.MethodPost, "/api/v1/auth/dev-login", "", set{"user_id": "dora"}).expect(t, http.StatusNotFound)
	require.Equal(t, "not_found", r.errorCode())
}

func TestDevPaymentsOff(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, withOptions(func(o *Options) { o.DevPayments = false }))
	alice := hs.token("alice", booking.RoleUser, 0)
	h := hs.hold(alice, 1, 10)
	r := hs.do(http.MethodPost, "/api/v1/holds/"+h.HoldID+"/confirm", alice, nil).expect(t, http.StatusNotFound)
	require.Equal(t, "not_found", r.errorCode())
}

// TestHoldLifecycle walks the happy path through the routes and their shapes.
func TestHoldLifecycle(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)

	// Browsing needs no token.
	var venues listResponse[venueResponse]
	hs.do(http.MethodGet, "/api/v1/venues", "", nil).expect(t, http.StatusOK).decode(t, &venues)
	require.Len(t, venues.Items, 1)
	var resources listResponse[resourceResponse]
	hs.do(http.MethodGet, "/api/v1/resources?venue_id="+hs.venue, "", nil).expect(t, http.StatusOK).decode(t, &resources)
	require.Len(t, resources.Items, 1)
	require.Equal(t, 60, resources.Items[0].SlotMinutes)

	start, end := hs.slot(1, 10)
	var avail availabilityResponse
	hs.do(http.MethodGet, "/api/v1/availability?resource_id="+hs.res+"&date="+start[:10], "", nil).
		expect(t, http.StatusOK).decode(t, &avail)
	slot := slotAt(t, avail, start)
	require.True(t, slot.Available)
	require.Empty(t, slot.Reason)
	require.Equal(t, 3, slot.Remaining)
	require.Equal(t, hs.res, slot.ResourceID)

	var h holdResponse
	hs.do(http.MethodPost, "/api/v1/holds", alice, set{"resource_id": hs.res, "start": start, "end": end, "quantity": 2}).
		expect(t, http.StatusCreated).decode(t, &h)
	require.Equal(t, string(booking.HoldHeld), h.Status)
	require.Equal(t, 2, h.Quantity)
	require.Equal(t, int64(2*5000), h.AmountCents)
	require.Equal(t, start, h.Start)
	require.Equal(t, "alice", h.UserID)

	hs.do(http.MethodGet, "/api/v1/availability?resource_id="+hs.res+"&date="+start[:10], "", nil).
		expect(t, http.StatusOK).decode(t, &avail)
	require.Equal(t, 1, slotAt(t, avail, start).Remaining)

	// Give it up: 200 with the hold, now cancelled; units back.
	var cancelled holdResponse
	hs.do(http.MethodDelete, "/api/v1/holds/"+h.HoldID, alice, nil).expect(t, http.StatusOK).decode(t, &cancelled)
	require.Equal(t, string(booking.HoldCancelled), cancelled.Status)
	hs.do(http.MethodDelete, "/api/v1/holds/"+h.HoldID, alice, nil).expect(t, http.StatusConflict)
	hs.do(http.MethodGet, "/api/v1/availability?resource_id="+hs.res+"&date="+start[:10], "", nil).
		expect(t, http.StatusOK).decode(t, &avail)
	require.Equal(t, 3, slotAt(t, avail, start).Remaining)

	// Book, read, cancel.
	b := hs.booking(alice, 1, 10)
	require.Equal(t, "CONFIRMED", b.Status)
	require.NotEmpty(t, b.CheckinCode)
	require.NotEmpty(t, b.ReleaseAt)
	var again bookingResponse
	hs.do(http.MethodGet, "/api/v1/bookings/"+b.BookingID, alice, nil).expect(t, http.StatusOK).decode(t, &again)
	require.Equal(t, b, again)
	var held holdResponse
	hs.do(http.MethodGet, "/api/v1/holds/"+b.HoldID, alice, nil).expect(t, http.StatusOK).decode(t, &held)
	require.Equal(t, string(booking.HoldConfirmed), held.Status)
	require.Equal(t, b.BookingID, held.BookingID)
	// A hold paid into a booking is no longer held: giving it up is a conflict, as for any hold no
	// longer held, and another user still sees nothing there.
	r := hs.do(http.MethodDelete, "/api/v1/holds/"+b.HoldID, alice, nil).expect(t, http.StatusConflict)
	require.Equal(t, "hold_not_active", r.errorCode())
	hs.do(http.MethodDelete, "/api/v1/holds/"+b.HoldID, hs.token("mallory", booking.RoleUser, 0), nil).expect(t, http.StatusNotFound)
	// Restoring a booking that was not released is a conflict.
	hs.do(http.MethodPost, "/api/v1/bookings/"+b.BookingID+"/restore", alice, nil).expect(t, http.StatusConflict)
	var c bookingResponse
	hs.do(http.MethodPost, "/api/v1/bookings/"+b.BookingID+"/cancel", alice, set{}).expect(t, http.StatusOK).decode(t, &c)
	require.Equal(t, "CANCELLED_BY_USER", c.Status)
	require.NotEmpty(t, c.CancelledAt)

	// Admin objects.
	var svc serviceResponse
	hs.do(http.MethodPost, "/api/v1/admin/services", hs.admin, set{"venue_id": hs.venue, "name": "Lesson",
		"duration_minutes": 60, "resource_ids": []string{hs.res}, "price_cents": 9900}).
		expect(t, http.StatusCreated).decode(t, &svc)
	require.Equal(t, []string{hs.res}, svc.ResourceIDs)
	var services listResponse[serviceResponse]
	hs.do(http.MethodGet, "/api/v1/services", "", nil).expect(t, http.StatusOK).decode(t, &services)
	require.Len(t, services.Items, 1)
	hs.do(http.MethodGet, "/api/v1/availability?service_id="+svc.ServiceID+"&date="+start[:10], "", nil).expect(t, http.StatusOK)
	var sh holdResponse
	s2, _ := hs.slot(1, 15)
	hs.do(http.MethodPost, "/api/v1/holds", alice, set{"service_id": svc.ServiceID, "start": s2}).
		expect(t, http.StatusCreated).decode(t, &sh)
	require.Equal(t, svc.ServiceID, sh.ServiceID)
	require.Equal(t, int64(9900), sh.AmountCents)
	// A service hold may name its end (ServiceHoldInput.end): the start plus the duration, nothing else.
	s3, e3 := hs.slot(1, 16)
	hs.do(http.MethodPost, "/api/v1/holds", alice, set{"service_id": svc.ServiceID, "start": s3, "end": e3}).
		expect(t, http.StatusCreated)
	s4, _ := hs.slot(1, 17)
	_, e4 := hs.slot(1, 18)
	offEnd := hs.do(http.MethodPost, "/api/v1/holds", alice, set{"service_id": svc.ServiceID, "start": s4, "end": e4})
	offEnd.expect(t, http.StatusUnprocessableEntity)
	require.Equal(t, "invalid_end", offEnd.errorCode())

	var g gracePolicyResponse
	hs.do(http.MethodPut, "/api/v1/admin/policies/grace", hs.admin, set{"category": "tennis", "grace_seconds": 600,
		"peak": []set{{"weekdays": []int{6, 7}, "from": "17:00", "to": "21:00", "grace_seconds": 300}}}).
		expect(t, http.StatusOK).decode(t, &g)
	require.Equal(t, 600, g.GraceSeconds)
	require.Len(t, g.Peak, 1)

	// Pagination of bookings.
	for hour := 12; hour < 15; hour++ {
		hs.booking(alice, 2, hour)
	}
	var page listResponse[bookingResponse]
	hs.do(http.MethodGet, "/api/v1/bookings?limit=2", alice, nil).expect(t, http.StatusOK).decode(t, &page)
	require.Len(t, page.Items, 2)
	require.NotEmpty(t, page.NextCursor)
	seen := map[string]bool{page.Items[0].BookingID: true, page.Items[1].BookingID: true}
	for page.NextCursor != "" {
		hs.do(http.MethodGet, "/api/v1/bookings?limit=2&cursor="+page.NextCursor, alice, nil).expect(t, http.StatusOK).decode(t, &page)
		for _, it := range page.Items {
			require.False(t, seen[it.BookingID])
			seen[it.BookingID] = true
		}
	}
	require.Len(t, seen, 4)
}

// slotAt finds the slot starting at start.
func slotAt(t *testing.T, a availabilityResponse, start string) slotResponse {
	t.Helper()
	for _, s := range a.Slots {
		if s.Start == start {
			return s
		}
	}
	t.Fatalf("no slot starts at %s in %+v", start, a.Slots)
	return slotResponse{}
}

// TestReleaseRestoreAndCheckIn: a no-show released at release_at can be restored by its owner within
// the window; staff can check a released booking in within the window too; after it, too late.
func TestReleaseRestoreAndCheckIn(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	ctx := t.Context()
	alice := hs.token("alice", booking.RoleUser, 0)
	first := hs.booking(alice, 1, 10)
	second := hs.booking(alice, 1, 12)
	third := hs.booking(alice, 1, 14)

	release := func(b bookingResponse) time.Time {
		t.Helper()
		at, err := time.Parse(time.RFC3339, b.ReleaseAt)
		require.NoError(t, err)
		id, err := strconv.ParseUint(b.BookingID, 10, 64)
		require.NoError(t, err)
		if hs.clock.Now().Before(at) {
			hs.clock.Set(at)
		}
		out, err := hs.eng.Release(ctx, release.Ref{BookingID: id, ReleaseAt: at})
		require.NoError(t, err)
		require.Equal(t, release.Released, out)
		return at
	}

	release(first)
	alice = hs.token("alice", booking.RoleUser, 0)
	var b bookingResponse
	hs.do(http.MethodGet, "/api/v1/bookings/"+first.BookingID, alice, nil).expect(t, http.StatusOK).decode(t, &b)
	require.Equal(t, "RELEASED", b.Status)
	require.NotEmpty(t, b.ReleasedAt)
	var restored bookingResponse // (a fresh value: omitted fields must not keep older answers' values)
	hs.do(http.MethodPost, "/api/v1/bookings/"+first.BookingID+"/restore", alice, nil).expect(t, http.StatusOK).decode(t, &restored)
	require.Equal(t, "CONFIRMED", restored.Status)
	require.Empty(t, restored.ReleasedAt)

	// An admin cancels for the user (before the restored booking falls due again: a release takes
	// every due booking of the venue in one batch).
	hs.admin = hs.token("root", booking.RoleAdmin, 0) // the clock moved past the first token's expiry
	var cancelled bookingResponse
	hs.do(http.MethodPost, "/api/v1/bookings/"+first.BookingID+"/cancel", hs.admin, nil).expect(t, http.StatusOK).decode(t, &cancelled)
	require.Equal(t, "CANCELLED_BY_ADMIN", cancelled.Status)

	release(second)
	staff := hs.token("sam", booking.RoleStaff, hs.venueNum())
	var arrived bookingResponse
	hs.do(http.MethodPost, "/api/v1/checkins", staff, set{"checkin_code": second.CheckinCode}).expect(t, http.StatusOK).decode(t, &arrived)
	require.Equal(t, "ARRIVED", arrived.Status)
	require.NotEmpty(t, arrived.CheckedInAt)

	at := release(third)
	hs.clock.Set(at.Add(31 * time.Minute)) // past the default 30-minute restore window
	alice = hs.token("alice", booking.RoleUser, 0)
	staff = hs.token("sam", booking.RoleStaff, hs.venueNum())
	r := hs.do(http.MethodPost, "/api/v1/bookings/"+third.BookingID+"/restore", alice, nil).expect(t, http.StatusConflict)
	require.Equal(t, "restore_window_closed", r.errorCode())
	r = hs.do(http.MethodPost, "/api/v1/checkins", staff, set{"checkin_code": third.CheckinCode}).expect(t, http.StatusConflict)
	require.Equal(t, "too_late", r.errorCode())
}

// TestConfirmRules: a repeated confirm answers the same booking; a cancelled hold cannot be
// confirmed; an expired hold whose units were taken is 409 hold_expired.
func TestConfirmRules(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	single := hs.newResource(1)
	alice := hs.token("alice", booking.RoleUser, 0)

	h := hs.hold(alice, 1, 10)
	var b1, b2 bookingResponse
	hs.do(http.MethodPost, "/api/v1/holds/"+h.HoldID+"/confirm", alice, nil).expect(t, http.StatusCreated).decode(t, &b1)
	hs.do(http.MethodPost, "/api/v1/holds/"+h.HoldID+"/confirm", alice, set{}).expect(t, http.StatusCreated).decode(t, &b2)
	require.Equal(t, b1, b2)

	c := hs.hold(alice, 1, 11)
	hs.do(http.MethodDelete, "/api/v1/holds/"+c.HoldID, alice, nil).expect(t, http.StatusOK)
	r := hs.do(http.MethodPost, "/api/v1/holds/"+c.HoldID+"/confirm", alice, nil).expect(t, http.StatusConflict)
	require.Equal(t, "hold_not_active", r.errorCode())

	start, end := hs.slot(1, 12)
	var lost holdResponse
	hs.do(http.MethodPost, "/api/v1/holds", alice, set{"resource_id": single, "start": start, "end": end}).
		expect(t, http.StatusCreated).decode(t, &lost)
	hs.clock.Advance(11 * time.Minute)
	alice = hs.token("alice", booking.RoleUser, 0)
	bob := hs.token("bob", booking.RoleUser, 0)
	hs.do(http.MethodPost, "/api/v1/holds", bob, set{"resource_id": single, "start": start, "end": end}).expect(t, http.StatusCreated)
	r = hs.do(http.MethodPost, "/api/v1/holds/"+lost.HoldID+"/confirm", alice, nil).expect(t, http.StatusConflict)
	require.Equal(t, "hold_expired", r.errorCode())
	r = hs.do(http.MethodPost, "/api/v1/holds", alice, set{"resource_id": single, "start": start, "end": end},
		header{"Accept-Language", "zh-CN"}).expect(t, http.StatusConflict)
	var e answer.Body
	r.decode(t, &e)
	require.Equal(t, "slot_full", e.Error.Code)
	require.Equal(t, answer.Catalog[answer.LangZH]["slot_full"], e.Error.Message)
	require.Equal(t, answer.LangZH, r.Header.Get("Content-Language"))
}

// TestManagerRunsOneVenue: a manager changes their venue's catalog and rules and works its front
// desk, but reaches neither another venue's catalog nor the installation's settings; staff change
// no catalog at all.
func TestManagerRunsOneVenue(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	boss := hs.token("boss", booking.RoleManager, hs.venueNum())
	staff := hs.token("sam", booking.RoleStaff, hs.venueNum())
	booked := hs.booking(alice, 1, 11)

	var other venueResponse
	hs.do(http.MethodPost, "/api/v1/admin/venues", hs.admin, set{"name": "Elsewhere", "timezone": testZone}).
		expect(t, http.StatusCreated).decode(t, &other)
	court := func(venue string) set {
		return set{"venue_id": venue, "name": "Court 9", "kind": "court", "capacity": 2, "category": "tennis", "price_cents": 100}
	}

	var res resourceResponse
	hs.do(http.MethodPost, "/api/v1/admin/resources", boss, court(hs.venue)).expect(t, http.StatusCreated).decode(t, &res)
	hs.do(http.MethodPut, "/api/v1/admin/resources/"+res.ResourceID+"/schedule", boss, set{"slot_minutes": 60,
		"weekly": []set{{"weekdays": []int{1, 2, 3, 4, 5, 6, 7}, "open": "09:00", "close": "12:00"}}}).expect(t, http.StatusOK)
	hs.do(http.MethodPut, "/api/v1/admin/resources/"+res.ResourceID+"/policy", boss, set{"requires_approval": true}).expect(t, http.StatusOK)
	hs.do(http.MethodPut, "/api/v1/admin/venues/"+hs.venue+"/release-mode", boss, set{"mode": "dry_run"}).expect(t, http.StatusOK)
	hs.do(http.MethodPost, "/api/v1/admin/services", boss, set{"venue_id": hs.venue, "name": "Lesson", "duration_minutes": 60,
		"price_cents": 100, "resource_ids": []string{res.ResourceID}}).expect(t, http.StatusCreated)

	// Not another venue's catalog, and nothing of the installation.
	r := hs.do(http.MethodPost, "/api/v1/admin/resources", boss, court(other.VenueID)).expect(t, http.StatusForbidden)
	require.Equal(t, "forbidden", r.errorCode())
	var theirs resourceResponse
	hs.do(http.MethodPost, "/api/v1/admin/resources", hs.admin, court(other.VenueID)).expect(t, http.StatusCreated).decode(t, &theirs)
	for _, rt := range []struct {
		method, path string
		body         any
	}{
		{"PUT", "/api/v1/admin/resources/" + theirs.ResourceID + "/schedule", set{"slot_minutes": 60, "weekly": []set{}}},
		{"PUT", "/api/v1/admin/resources/" + theirs.ResourceID + "/policy", set{"requires_approval": true}},
		{"PUT", "/api/v1/admin/venues/" + other.VenueID + "/release-mode", set{"mode": "on"}},
		{"POST", "/api/v1/admin/venues", set{"name": "Mine", "timezone": testZone}},
		{"PUT", "/api/v1/admin/policies/grace", set{"category": "tennis", "grace_minutes": 1}},
		{"PUT", "/api/v1/admin/policies/noshow", set{"max_noshows": 1}},
		{"GET", "/api/v1/admin/refunds", nil},
		{"GET", "/api/v1/admin/webhooks", nil},
	} {
		r := hs.do(rt.method, rt.path, boss, rt.body)
		require.Equal(t, http.StatusForbidden, r.Status, "%s %s: %s", rt.method, rt.path, r.Body)
	}
	// Staff work the desk but change no catalog.
	for _, rt := range []struct{ method, path string }{
		{"POST", "/api/v1/admin/resources"},
		{"PUT", "/api/v1/admin/resources/" + res.ResourceID + "/schedule"},
		{"PUT", "/api/v1/admin/resources/" + res.ResourceID + "/policy"},
		{"POST", "/api/v1/admin/services"},
	} {
		r := hs.do(rt.method, rt.path, staff, court(hs.venue))
		require.Equal(t, http.StatusForbidden, r.Status, "%s %s: %s", rt.method, rt.path, r.Body)
	}

	// The desk: the venue's list, a booking, and check-in (too early yet).
	var list listResponse[bookingResponse]
	hs.do(http.MethodGet, "/api/v1/admin/bookings", boss, nil).expect(t, http.StatusOK).decode(t, &list)
	require.Len(t, list.Items, 1)
	require.Equal(t, booked.BookingID, list.Items[0].BookingID)
	hs.do(http.MethodGet, "/api/v1/bookings/"+booked.BookingID, boss, nil).expect(t, http.StatusOK)
	r = hs.do(http.MethodPost, "/api/v1/checkins", boss, set{"checkin_code": booked.CheckinCode}).expect(t, http.StatusConflict)
	require.Equal(t, "too_early", r.errorCode())

	// Dev log-in mints managers too, bound to their venue.
	var tok struct {
		Token string `json:"token"`
	}
	hs.do(http.MethodPost, "/api/v1/auth/dev-login", "", set{"user_id": "boss-2", "role": "manager"}).expect(t, http.StatusBadRequest)
	hs.do(http.MethodPost, "/api/v1/auth/dev-login", "", set{"user_id": "boss-2", "role": "manager", "venue_id": hs.venue}).
		expect(t, http.StatusOK).decode(t, &tok)
	hs.do(http.MethodPost, "/api/v1/admin/resources", tok.Token, court(hs.venue)).expect(t, http.StatusCreated)
}
