package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/api/internal/request"
	"github.com/slotwheel/slotwheel/engine/booking"
)

// bodyCase is one request body fed to a route: raw JSON text (a string) or an object (a map, merged
// over the route's base body). status 0 means "any 4xx"; code "" means "any non-empty code".
type bodyCase struct {
	name   string
	body   any
	status int
	code   string
}

// set is a field override; a nil value removes the field.
type set map[string]any

// TestBadInputIsA4xxOnEveryWriteRoute feeds every route that takes a body malformed JSON, unknown
// fields, wrong types, out-of-range numbers, bad, off-grid and past times and a 2 MiB body: every
// answer is a 4xx with the error body (validated against openapi.json), never a 5xx, never a 2xx.
func TestBadInputIsA4xxOnEveryWriteRoute(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	staff := hs.token("sam", booking.RoleStaff, hs.venueNum())
	held := hs.hold(alice, 1, 9)
	booked := hs.booking(alice, 1, 11)

	start, end := hs.slot(1, 10)
	pastStart, pastEnd := hs.slot(-1, 10)
	farStart, farEnd := hs.slot(60, 10)
	nightStart, nightEnd := hs.slot(1, 3)
	offGrid := func(s string) string { return strings.Replace(s, ":00:00", ":17:00", 1) }
	noOffset := strings.TrimSuffix(start, "+08:00")

	routes := []struct {
		method, path, token string
		base                set
		emptyBodyOK         bool // POSTs that take no input
		cases               []bodyCase
	}{
		{method: "POST", path: "/api/v1/auth/dev-login", base: set{"user_id": "bob"}, cases: []bodyCase{
			{"user_id number", set{"user_id": 5}, 400, "invalid_type"},
			{"user_id with spaces", set{"user_id": "has space"}, 422, "invalid_user_id"},
			{"unknown role", set{"role": "boss"}, 422, "invalid_role"},
			{"venue_id number", set{"role": "staff", "venue_id": 7}, 400, "invalid_id"},
			{"staff without venue", set{"role": "staff"}, 400, "missing_field"},
			{"no user_id", set{"user_id": nil}, 400, "missing_field"},
		}},
		{method: "POST", path: "/api/v1/auth/wechat", base: set{"code": "abc"}, cases: []bodyCase{
			{"code number", set{"code": 5}, 400, "invalid_type"},
			{"code empty", set{"code": ""}, 422, "invalid_code"},
			{"no code", set{"code": nil}, 400, "missing_field"},
		}},
		{method: "POST", path: "/api/v1/admin/venues", token: hs.admin, base: set{"name": "V", "timezone": testZone}, cases: []bodyCase{
			{"name number", set{"name": 5}, 400, "invalid_type"},
			{"name empty", set{"name": ""}, 422, "invalid_name"},
			{"name too long", set{"name": strings.Repeat("n", 201)}, 422, "invalid_name"},
			{"unknown zone", set{"timezone": "Mars/Olympus_Mons"}, 422, "invalid_timezone"},
			{"no timezone", set{"timezone": nil}, 400, "missing_field"},
		}},
		{method: "POST", path: "/api/v1/admin/resources", token: hs.admin,
			base: set{"venue_id": hs.venue, "name": "R", "kind": "court", "capacity": 2, "category": "tennis", "price_cents": 100},
			cases: []bodyCase{
				{"venue_id number", set{"venue_id": 1}, 400, "invalid_id"},
				{"venue_id not digits", set{"venue_id": "abc"}, 400, "invalid_id"},
				{"venue_id zero", set{"venue_id": "0"}, 400, "invalid_id"},
				{"venue_id too big", set{"venue_id": "99999999999999999999999"}, 400, "invalid_id"},
				{"capacity string", set{"capacity": "3"}, 400, "invalid_type"},
				{"capacity zero", set{"capacity": 0}, 422, "invalid_capacity"},
				{"capacity negative", set{"capacity": -1}, 422, "invalid_capacity"},
				{"capacity huge", set{"capacity": 1e20}, 422, "invalid_capacity"},
				{"capacity fraction", set{"capacity": 2.5}, 422, "invalid_capacity"},
				{"capacity over max", set{"capacity": 1_000_001}, 422, "invalid_capacity"},
				{"price negative", set{"price_cents": -5}, 422, "invalid_price"},
				{"price huge", set{"price_cents": 1e30}, 422, "invalid_price"},
				{"no price", set{"price_cents": nil}, 400, "missing_field"},
				{"no kind", set{"kind": nil}, 400, "missing_field"},
				{"unknown venue", set{"venue_id": "999999"}, 422, ""},
				{"capacity bool", set{"capacity": true}, 400, "invalid_type"},
				{"name object", set{"name": set{"x": 1}}, 400, "invalid_type"},
			}},
		{method: "PUT", path: "/api/v1/admin/resources/" + hs.res + "/schedule", token: hs.admin,
			base: set{"slot_minutes": 60, "weekly": []set{{"weekdays": []int{1, 2, 3, 4, 5, 6, 7}, "open": "08:00", "close": "22:00"}}, "horizon_days": 14},
			cases: []bodyCase{
				{"slot_minutes string", set{"slot_minutes": "60"}, 400, "invalid_type"},
				{"slot_minutes zero", set{"slot_minutes": 0}, 422, "invalid_slot_minutes"},
				{"slot_minutes huge", set{"slot_minutes": 1e12}, 422, "invalid_slot_minutes"},
				{"weekly string", set{"weekly": "always"}, 400, "invalid_type"},
				{"weekday 0", set{"weekly": []set{{"weekdays": []int{0}, "open": "08:00", "close": "22:00"}}}, 422, "invalid_weekdays"},
				{"weekday 8", set{"weekly": []set{{"weekdays": []int{8}, "open": "08:00", "close": "22:00"}}}, 422, "invalid_weekdays"},
				{"open 8am", set{"weekly": []set{{"weekdays": []int{1}, "open": "8am", "close": "22:00"}}}, 422, "invalid_time_of_day"},
				{"close before open", set{"weekly": []set{{"weekdays": []int{1}, "open": "22:00", "close": "08:00"}}}, 422, ""},
				{"unknown rule field", set{"weekly": []set{{"weekdays": []int{1}, "open": "08:00", "close": "22:00", "lunch": true}}}, 400, "unknown_field"},
				{"horizon huge", set{"horizon_days": 1000}, 422, "invalid_horizon_days"},
				{"bad exception date", set{"exceptions": []set{{"date": "2025-13-45", "closed": true}}}, 422, "invalid_date"},
				{"half exception", set{"exceptions": []set{{"date": "2025-05-01"}}}, 422, "invalid_exception"},
				{"no weekly", set{"weekly": nil}, 400, "missing_field"},
				{"no slot_minutes", set{"slot_minutes": nil}, 400, "missing_field"},
			}},
		{method: "POST", path: "/api/v1/admin/services", token: hs.admin,
			base: set{"venue_id": hs.venue, "name": "Lesson", "duration_minutes": 60, "resource_ids": []string{hs.res}, "price_cents": 100},
			cases: []bodyCase{
				{"duration zero", set{"duration_minutes": 0}, 422, "invalid_duration"},
				{"duration off the hourly grid", set{"duration_minutes": 50}, 422, "invalid_duration"},
				{"prep negative", set{"prep_minutes": -1}, 422, "invalid_buffer"},
				{"no resources", set{"resource_ids": []string{}}, 422, "invalid_resource_ids"},
				{"resource id number", set{"resource_ids": []int{1}}, 400, "invalid_id"},
				{"resource ids twice", set{"resource_ids": []string{hs.res, hs.res}}, 422, "invalid_resource_ids"},
				{"unknown resource", set{"resource_ids": []string{"999999"}}, 422, ""},
				{"no resource_ids", set{"resource_ids": nil}, 400, "missing_field"},
			}},
		{method: "PUT", path: "/api/v1/admin/policies/grace", token: hs.admin, base: set{"category": "tennis", "grace_seconds": 600},
			cases: []bodyCase{
				{"grace negative", set{"grace_seconds": -1}, 422, "invalid_grace"},
				{"grace string", set{"grace_seconds": "600"}, 400, "invalid_type"},
				{"grace too long", set{"grace_seconds": 86401}, 422, "invalid_grace"},
				{"no category", set{"category": nil}, 400, "missing_field"},
				{"peak weekday 8", set{"peak": []set{{"weekdays": []int{8}, "from": "17:00", "to": "21:00", "grace_seconds": 300}}}, 422, "invalid_weekdays"},
				{"peak without grace", set{"peak": []set{{"weekdays": []int{1}, "from": "17:00", "to": "21:00"}}}, 400, "missing_field"},
			}},
		{method: "PUT", path: "/api/v1/admin/venues/" + hs.venue + "/release-mode", token: hs.admin, base: set{"mode": "dry_run"},
			cases: []bodyCase{
				{"mode number", set{"mode": 1}, 400, "invalid_type"},
				{"unknown mode", set{"mode": "sometimes"}, 422, "invalid_release_mode"},
				{"no mode", set{"mode": nil}, 400, "missing_field"},
			}},
		{method: "POST", path: "/api/v1/admin/webhooks", token: hs.admin, base: set{"url": "https://example.com/hook"},
			cases: []bodyCase{
				{"url number", set{"url": 5}, 400, "invalid_type"},
				{"ftp url", set{"url": "ftp://example.com/hook"}, 422, "invalid_url"},
				{"relative url", set{"url": "/hook"}, 422, "invalid_url"},
				{"url with password", set{"url": "https://u:p@example.com/"}, 422, "invalid_url"},
				{"url too long", set{"url": "https://example.com/" + strings.Repeat("a", 2100)}, 422, "invalid_url"},
				{"event types string", set{"event_types": "booking.released"}, 400, "invalid_type"},
				{"unknown event type", set{"event_types": []string{"booking.exploded"}}, 422, "invalid_event_type"},
				{"venue number", set{"venue_id": 1}, 400, "invalid_id"},
				{"unknown venue", set{"venue_id": "999999"}, 422, "unknown_venue"},
				{"no url", set{"url": nil}, 400, "missing_field"},
			}},
		{method: "PUT", path: "/api/v1/admin/notifications/wechat", token: hs.admin,
			base: set{"event_type": "booking.released", "template_id": "tpl", "data": set{"thing1": "resource_name"}},
			cases: []bodyCase{
				{"unknown event type", set{"event_type": "booking.exploded"}, 422, "invalid_event_type"},
				{"empty template", set{"template_id": ""}, 422, "invalid_template_id"},
				{"data list", set{"data": []string{"thing1"}}, 400, "invalid_type"},
				{"data empty", set{"data": set{}}, 422, "invalid_template_data"},
				{"unknown key type", set{"data": set{"password1": "resource_name"}}, 422, "invalid_template_data"},
				{"unknown field", set{"data": set{"thing1": "credit_card"}}, 422, "invalid_template_data"},
				{"no data", set{"data": nil}, 400, "missing_field"},
			}},
		{method: "POST", path: "/api/v1/holds", token: alice, base: set{"resource_id": hs.res, "start": start, "end": end},
			cases: []bodyCase{
				{"resource_id number", set{"resource_id": 1}, 400, "invalid_id"},
				{"start number", set{"start": 1714557600}, 400, "invalid_time"},
				{"start words", set{"start": "tomorrow"}, 400, "invalid_time"},
				{"start without offset", set{"start": noOffset}, 400, "invalid_time"},
				{"start date only", set{"start": start[:10]}, 400, "invalid_time"},
				{"start year 1 (Go's zero time in UTC)", set{"start": "0001-01-01T08:00:00+08:00"}, 400, "invalid_time"},
				{"start year 1 UTC", set{"start": "0001-01-01T00:00:00Z"}, 400, "invalid_time"},
				{"start year 1999", set{"start": "1999-12-31T23:00:00+08:00"}, 400, "invalid_time"},
				{"start offset minute 60", set{"start": start[:19] + "+08:60"}, 400, "invalid_time"},
				{"start offset hour 24", set{"start": start[:19] + "+24:00"}, 400, "invalid_time"},
				{"end year 1", set{"end": "0001-01-01T09:00:00+08:00"}, 400, "invalid_time"},
				{"end year 0", set{"end": "0000-01-01T09:00:00+08:00"}, 400, "invalid_time"},
				{"service hold start year 1", set{"service_id": "1", "end": nil, "start": "0001-01-01T08:00:00+08:00"}, 400, "invalid_time"},
				{"quantity string", set{"quantity": "1"}, 400, "invalid_type"},
				{"quantity zero", set{"quantity": 0}, 422, "invalid_quantity"},
				{"quantity fraction", set{"quantity": 1.5}, 422, "invalid_quantity"},
				{"quantity huge", set{"quantity": 1e30}, 422, "invalid_quantity"},
				{"quantity over capacity", set{"quantity": 4}, 422, "invalid_quantity"},
				{"off-grid start", set{"start": offGrid(start)}, 422, "off_grid"},
				{"off-grid end", set{"end": offGrid(end)}, 422, "off_grid"},
				{"past slot", set{"start": pastStart, "end": pastEnd}, 422, "slot_past"},
				{"too far", set{"start": farStart, "end": farEnd}, 422, "too_far"},
				{"closed at night", set{"start": nightStart, "end": nightEnd}, 422, "slot_closed"},
				{"end before start", set{"start": end, "end": start}, 422, "invalid_window"},
				{"no start", set{"start": nil}, 400, "missing_field"},
				{"no end", set{"end": nil}, 400, "missing_field"},
				{"no resource", set{"resource_id": nil}, 400, "missing_field"},
				{"unknown resource", set{"resource_id": "999999"}, 422, "unknown_resource"},
				{"unknown service", set{"service_id": "999999", "end": nil}, 422, "unknown_service"},
			}},
		{method: "POST", path: "/api/v1/holds/" + held.HoldID + "/confirm", token: alice, emptyBodyOK: true},
		{method: "POST", path: "/api/v1/payments/notify",
			base: set{"hold_id": held.HoldID, "payment_id": "pay-bad", "amount_cents": held.AmountCents, "paid_at": hs.clock.Now().Format(time.RFC3339)},
			cases: []bodyCase{
				{"hold_id number", set{"hold_id": 5}, 400, "invalid_type"},
				{"amount string", set{"amount_cents": "5000"}, 400, "invalid_type"},
				{"amount negative", set{"amount_cents": -1}, 422, "invalid_amount"},
				{"amount wrong", set{"amount_cents": held.AmountCents + 1}, 422, "amount_mismatch"},
				{"paid_at words", set{"paid_at": "yesterday"}, 400, "invalid_time"},
				{"paid_at year 1", set{"paid_at": "0001-01-01T00:00:00Z"}, 400, "invalid_time"},
				{"payment_id empty", set{"payment_id": ""}, 422, "invalid_payment_id"},
				{"no paid_at", set{"paid_at": nil}, 400, "missing_field"},
				{"no hold_id", set{"hold_id": nil}, 400, "missing_field"},
				{"hold_id with spaces", set{"hold_id": "a b"}, 422, "invalid_hold_id"},
				{"hold_id empty", set{"hold_id": ""}, 422, "invalid_hold_id"},
				{"hold_id too long", set{"hold_id": "h1_" + strings.Repeat("a", 62)}, 422, "invalid_hold_id"},
			}},
		{method: "POST", path: "/api/v1/bookings/" + booked.BookingID + "/cancel", token: alice, emptyBodyOK: true},
		{method: "POST", path: "/api/v1/bookings/" + booked.BookingID + "/restore", token: alice, emptyBodyOK: true},
		{method: "POST", path: "/api/v1/checkins", token: staff, base: set{"checkin_code": booked.CheckinCode},
			cases: []bodyCase{
				{"code number", set{"checkin_code": 5}, 400, "invalid_type"},
				{"code empty", set{"checkin_code": ""}, 422, "invalid_checkin_code"},
				{"code too long", set{"checkin_code": strings.Repeat("A", 17)}, 422, "invalid_checkin_code"},
				{"no code", set{"checkin_code": nil}, 400, "missing_field"},
				{"unknown code", set{"checkin_code": "ZZZZZZZZ"}, 404, "not_found"},
			}},
		{method: "POST", path: "/api/v1/waitlist", token: alice, base: set{"resource_id": hs.res, "start": start, "end": end},
			cases: []bodyCase{
				{"resource_id number", set{"resource_id": 1}, 400, "invalid_id"},
				{"start without offset", set{"start": noOffset}, 400, "invalid_time"},
				{"start year 1", set{"start": "0001-01-01T08:00:00+08:00"}, 400, "invalid_time"},
				{"end year 1", set{"end": "0001-01-01T09:00:00+08:00"}, 400, "invalid_time"},
				{"end before start", set{"start": end, "end": start}, 422, "invalid_window"},
				{"no end", set{"end": nil}, 400, "missing_field"},
			}},
	}

	huge := `{"name":"` + strings.Repeat("x", 2<<20) + `"}`
	generic := []bodyCase{
		{"truncated JSON", `{`, 400, "invalid_json"},
		{"not JSON", `hello`, 400, "invalid_json"},
		{"array", `[]`, 400, "invalid_json"},
		{"null", `null`, 400, "invalid_json"},
		{"string", `"x"`, 400, "invalid_json"},
		{"trailing object", `{} {}`, 400, "invalid_json"},
		{"trailing garbage", `{}x`, 400, "invalid_json"},
		{"unknown field", `{"zzz_unknown": 1}`, 400, "unknown_field"},
		{"2 MiB body", huge, http.StatusRequestEntityTooLarge, "body_too_large"},
	}

	for _, rt := range routes {
		cases := append([]bodyCase(nil), generic...)
		if !rt.emptyBodyOK {
			cases = append(cases, bodyCase{"empty body", ``, 400, "invalid_json"}, bodyCase{"empty object", `{}`, 400, "missing_field"})
		}
		cases = append(cases, rt.cases...)
		for k, v := range rt.base { // a valid body that names one of its fields twice
			one, err := json.Marshal(set{k: v})
			require.NoError(t, err)
			cases = append(cases, bodyCase{"field twice", string(one[:len(one)-1]) + "," + bodyText(t, rt.base, set{})[1:], 400, "invalid_json"})
			break
		}
		for _, tc := range cases {
			raw := bodyText(t, rt.base, tc.body)
			var headers []header
			if rt.path == "/api/v1/payments/notify" {
				headers = append(headers, header{headerSignature, Sign(testPaymentSecret, []byte(raw), hs.clock.Now())})
			}
			r := hs.do(rt.method, rt.path, rt.token, raw, headers...)
			name := rt.method + " " + rt.path + ": " + tc.name
			require.GreaterOrEqual(t, r.Status, 400, "%s: %s", name, r.Body)
			require.Less(t, r.Status, 500, "%s: %s", name, r.Body)
			if tc.status != 0 {
				require.Equal(t, tc.status, r.Status, "%s: %s", name, r.Body)
			}
			require.NotEmpty(t, r.errorCode(), "%s: %s", name, r.Body)
			if tc.code != "" {
				require.Equal(t, tc.code, r.errorCode(), "%s: %s", name, r.Body)
			}
		}
	}

	// Nothing above changed anything: the hold is still held, the booking still confirmed.
	var h holdResponse
	hs.do(http.MethodGet, "/api/v1/holds/"+held.HoldID, alice, nil).expect(t, http.StatusOK).decode(t, &h)
	require.Equal(t, string(booking.HoldHeld), h.Status)
	var b bookingResponse
	hs.do(http.MethodGet, "/api/v1/bookings/"+booked.BookingID, alice, nil).expect(t, http.StatusOK).decode(t, &b)
	require.Equal(t, "CONFIRMED", b.Status)
}

// bodyText renders a case's body: raw text as is, an override merged over base.
func bodyText(t *testing.T, base set, body any) string {
	t.Helper()
	if s, ok := body.(string); ok {
		return s
	}
	m := map[string]any{}
	for k, v := range base {
		m[k] = v
	}
	for k, v := range body.(set) {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return string(b)
}

// TestBadQueryIsA4xx covers the GET routes' query parameters.
func TestBadQueryIsA4xx(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	for _, tc := range []struct {
		path, token string
		status      int
		code        string
	}{
		{"/api/v1/resources?venue_id=abc", "", 400, "invalid_id"},
		{"/api/v1/services?venue_id=-1", "", 400, "invalid_id"},
		{"/api/v1/availability?date=2025-05-01", "", 400, "missing_parameter"},
		{"/api/v1/availability?resource_id=" + hs.res, "", 400, "missing_parameter"},
		{"/api/v1/availability?resource_id=" + hs.res + "&date=tomorrow", "", 400, "invalid_date"},
		{"/api/v1/availability?resource_id=" + hs.res + "&date=2025-02-30", "", 400, "invalid_date"},
		{"/api/v1/availability?resource_id=x1&date=2025-05-01", "", 400, "invalid_id"},
		{"/api/v1/availability?resource_id=999999&date=2025-05-01", "", 0, ""},
		{"/api/v1/bookings?limit=0", alice, 400, "invalid_limit"},
		{"/api/v1/bookings?limit=101", alice, 422, "invalid_limit"},
		{"/api/v1/bookings?limit=ten", alice, 400, "invalid_limit"},
		{"/api/v1/bookings?cursor=not-a-cursor", alice, 422, "invalid_cursor"},
		// A pair Go's parser would drop, leaving the rest to be read as if it had not been sent.
		{"/api/v1/bookings?cursor=%zz", alice, 400, "invalid_query"},
		{"/api/v1/bookings?limit=5;cursor=x", alice, 400, "invalid_query"},
		{"/api/v1/availability?resource_id=" + hs.res + "&date=2025-05-01&x=%", "", 400, "invalid_query"},
		{"/api/v1/bookings/abc", alice, 404, "not_found"},
		{"/api/v1/bookings/0", alice, 404, "not_found"},
		{"/api/v1/holds/" + strings.Repeat("h", 65), alice, 404, "not_found"},
		{"/api/v1/holds/h1_00000000000000000000", alice, 404, "not_found"},
	} {
		r := hs.do(http.MethodGet, tc.path, tc.token, nil)
		require.GreaterOrEqual(t, r.Status, 400, "%s: %s", tc.path, r.Body)
		require.Less(t, r.Status, 500, "%s: %s", tc.path, r.Body)
		if tc.status != 0 {
			require.Equal(t, tc.status, r.Status, "%s: %s", tc.path, r.Body)
			require.Equal(t, tc.code, r.errorCode(), "%s: %s", tc.path, r.Body)
		}
	}
}

func TestDecodeTime(t *testing.T) {
	t.Parallel()
	for s, ok := range map[string]bool{
		"2025-05-01T10:00:00+08:00":     true,
		"2025-05-01T02:00:00Z":          true,
		"2025-05-01t02:00:00z":          true,
		"2025-05-01T02:00:00.123Z":      true,
		"2025-05-01T10:00:00":           false,
		"2025-05-01 10:00:00+08:00":     false,
		"2025-05-01T10:00+08:00":        false,
		"2025-05-01T10:00:00+0800":      false,
		"2025-05-01":                    false,
		"2025-02-30T10:00:00Z":          false,
		"Thu, 01 May 2025 10:00:00 GMT": false,
		"0001-01-01T08:00:00+08:00":     false, // Go's zero time, in UTC
		"0001-01-01T00:00:00Z":          false,
		"0000-01-01T00:00:00Z":          false,
		"1999-12-31T23:59:59+08:00":     false,
		"2000-01-01T00:00:00+08:00":     true, // 1999 in UTC, but 2000 as written
		"9999-12-31T23:59:59Z":          true,
	} {
		_, got := request.ParseTime(s)
		require.Equal(t, ok, got, s)
	}
}

// TestRefusedInputNamesTheField: a refused time names its field, in both languages, and a hold_id
// that cannot be a hold id is not described as decimal digits.
func TestRefusedInputNamesTheField(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	start, end := hs.slot(1, 10)

	for _, tc := range []struct {
		path  string
		body  set
		field string
	}{
		{"/api/v1/holds", set{"resource_id": hs.res, "start": "0001-01-01T08:00:00+08:00", "end": end}, "start"},
		{"/api/v1/holds", set{"resource_id": hs.res, "start": start, "end": "0001-01-01T09:00:00+08:00"}, "end"},
		{"/api/v1/holds", set{"resource_id": hs.res, "start": "tomorrow", "end": end}, "start"},
		{"/api/v1/holds", set{"resource_id": hs.res, "start": start, "end": 5}, "end"},
		{"/api/v1/waitlist", set{"resource_id": hs.res, "start": "0001-01-01T08:00:00+08:00", "end": end}, "start"},
	} {
		var en, zh answer.Body
		hs.do(http.MethodPost, tc.path, alice, tc.body).expect(t, http.StatusBadRequest).decode(t, &en)
		require.Equal(t, "invalid_time", en.Error.Code, "%s %v", tc.path, tc.body)
		require.Contains(t, en.Error.Message, "(field: "+tc.field+")", "%s %v", tc.path, tc.body)
		require.Contains(t, en.Error.Message, "2000 to 9999")
		hs.do(http.MethodPost, tc.path, alice, tc.body, header{"Accept-Language", "zh-CN"}).
			expect(t, http.StatusBadRequest).decode(t, &zh)
		require.Equal(t, "invalid_time", zh.Error.Code)
		require.Contains(t, zh.Error.Message, "（字段："+tc.field+"）")
	}

	now := hs.clock.Now()
	for _, holdID := range []string{"", "a b", strings.Repeat("h", 65)} {
		body := paymentBody(t, holdID, "pay-x", 100, now)
		var en, zh answer.Body
		hs.notify(body, testPaymentSecret, now).expect(t, http.StatusUnprocessableEntity).decode(t, &en)
		require.Equal(t, "invalid_hold_id", en.Error.Code, "%q", holdID)
		require.Contains(t, en.Error.Message, "hold id")
		require.Contains(t, en.Error.Message, "(field: hold_id)")
		require.NotContains(t, en.Error.Message, "digits")
		hs.do(http.MethodPost, "/api/v1/payments/notify", "", body,
			header{headerSignature, Sign(testPaymentSecret, body, now)}, header{"Accept-Language", "zh-CN"}).
			expect(t, http.StatusUnprocessableEntity).decode(t, &zh)
		require.Equal(t, "invalid_hold_id", zh.Error.Code)
		require.Regexp(t, `\p{Han}`, zh.Error.Message)
	}
}
