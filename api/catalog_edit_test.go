package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// remaining is what availability says is left of the resource's slot days ahead at hour.
func (hs *harness) remaining(res string, days, hour int) slotResponse {
	hs.t.Helper()
	start, _ := hs.slot(days, hour)
	var a availabilityResponse
	hs.do(http.MethodGet, "/api/v1/availability?resource_id="+res+"&date="+start[:10], "", nil).
		expect(hs.t, http.StatusOK).decode(hs.t, &a)
	for _, s := range a.Slots {
		if s.Start == start {
			return s
		}
	}
	hs.t.Fatalf("no slot at %s", start)
	return slotResponse{}
}

// TestTheManagerEditsAResource: a resource's name, price, capacity and status change through one
// PATCH each, and what guests can book follows at once; a capacity under the bookings already made
// is refused naming them, or cancels them when asked; a disabled resource takes no new holds and
// keeps its bookings unless the edit cancels them.
func TestTheManagerEditsAResource(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, withCapacity(3))
	boss := hs.token("boss", booking.RoleManager, hs.venueNum())
	alice := hs.token("alice", booking.RoleUser, 0)
	path := "/api/v1/admin/resources/" + hs.res
	var r resourceResponse

	hs.do(http.MethodPatch, path, boss, set{"name": "Court A", "price_cents": 8000}).expect(t, http.StatusOK).decode(t, &r)
	require.Equal(t, "Court A", r.Name)
	require.EqualValues(t, 8000, r.PriceCents)
	require.Equal(t, 3, r.Capacity, "what the edit leaves out stays")
	require.EqualValues(t, 8000, hs.hold(alice, 1, 9).AmountCents, "a new hold costs the new price")

	// Bad input: the field is named, and nothing is half-saved.
	for _, tc := range []struct {
		body        set
		status      int
		code, field string
	}{
		{set{"name": "Court B", "capacity": 0}, http.StatusUnprocessableEntity, "invalid_capacity", "capacity"},
		{set{"name": "Court B", "status": "gone"}, http.StatusUnprocessableEntity, "invalid_status", "status"},
		{set{"name": ""}, http.StatusUnprocessableEntity, "invalid_name", "name"},
		{set{"name": "Court B", "colour": "red"}, http.StatusBadRequest, "unknown_field", "colour"},
		{set{"name": "Court B", "capacity": "two"}, http.StatusBadRequest, "invalid_type", "capacity"},
	} {
		r := hs.do(http.MethodPatch, path, boss, tc.body).expect(t, tc.status)
		require.Equal(t, tc.code, r.errorCode(), "%v", tc.body)
		var e struct {
			Error struct{ Field string } `json:"error"`
		}
		r.decode(t, &e)
		require.Equal(t, tc.field, e.Error.Field, "%v", tc.body)
	}
	hs.do(http.MethodPatch, path, boss, set{}).expect(t, http.StatusOK).decode(t, &r)
	require.Equal(t, "Court A", r.Name, "a refused edit changed nothing")

	// Capacity: two bookings in one slot; one unit is too few unless they are cancelled.
	b1, b2 := hs.booking(alice, 1, 10), hs.paid(alice, 1, 10, "pay-b2")
	hs.do(http.MethodPatch, path, boss, set{"capacity": 5}).expect(t, http.StatusOK)
	require.Equal(t, 3, hs.remaining(hs.res, 1, 10).Remaining, "five units, two taken")
	c := hs.do(http.MethodPatch, path, boss, set{"capacity": 1, "name": "Court C"}).expect(t, http.StatusConflict)
	require.Equal(t, "capacity_conflict", c.errorCode())
	var conflict struct {
		Error struct {
			Details struct {
				BookingIDs []string `json:"booking_ids"`
			} `json:"details"`
		} `json:"error"`
	}
	c.decode(t, &conflict)
	require.Equal(t, []string{b2.BookingID}, conflict.Error.Details.BookingIDs, "the newest booking would give way")
	hs.do(http.MethodPatch, path, boss, set{}).expect(t, http.StatusOK).decode(t, &r)
	require.Equal(t, 5, r.Capacity)
	require.Equal(t, "Court A", r.Name, "the refused capacity took the name with it")
	hs.do(http.MethodPatch, path, boss, set{"capacity": 1, "cancel_affected": true}).expect(t, http.StatusOK).decode(t, &r)
	require.Equal(t, 1, r.Capacity)
	require.Equal(t, "CONFIRMED", hs.get(b1).Status, "who booked first keeps the one unit")
	require.Equal(t, "CANCELLED_BY_ADMIN", hs.get(b2).Status)
	require.Equal(t, b2.AmountCents, hs.refundOf(b2).AmountCents, "refunded in full")
	require.Equal(t, 0, hs.remaining(hs.res, 1, 10).Remaining)
	require.Equal(t, 1, hs.remaining(hs.res, 1, 12).Remaining)

	// Disabled: no new holds, the booking stays; enabled again, sold again.
	hs.do(http.MethodPatch, path, boss, set{"status": "disabled"}).expect(t, http.StatusOK).decode(t, &r)
	require.Equal(t, "disabled", r.Status)
	start, end := hs.slot(1, 12)
	h := hs.do(http.MethodPost, "/api/v1/holds", alice, set{"resource_id": hs.res, "start": start, "end": end}).expect(t, http.StatusConflict)
	require.Equal(t, "resource_inactive", h.errorCode())
	require.False(t, hs.remaining(hs.res, 1, 12).Available)
	var list listResponse[bookingResponse]
	hs.do(http.MethodGet, "/api/v1/admin/bookings?status=CONFIRMED", boss, nil).expect(t, http.StatusOK).decode(t, &list)
	require.Len(t, list.Items, 1, "disabling kept the booking")
	hs.do(http.MethodPatch, path, boss, set{"status": "active"}).expect(t, http.StatusOK)
	hs.hold(alice, 1, 12)
	hs.do(http.MethodPatch, path, boss, set{"status": "disabled", "cancel_affected": true}).expect(t, http.StatusOK)
	hs.do(http.MethodGet, "/api/v1/admin/bookings?status=CONFIRMED", boss, nil).expect(t, http.StatusOK).decode(t, &list)
	require.Empty(t, list.Items, "disabling with cancel_affected cancelled what was left")

	// Another venue's manager reaches nothing.
	other := hs.token("olga", booking.RoleManager, hs.venueNum()+1000)
	hs.do(http.MethodPatch, path, other, set{"name": "Mine"}).expect(t, http.StatusForbidden)
	hs.do(http.MethodPatch, "/api/v1/admin/resources/999999", boss, set{"name": "X"}).expect(t, http.StatusNotFound)
}

// TestTheManagerEditsServicesAndVenues: a disabled service is not sold while its resource is; a
// venue is renamed; the schedule and grace policies read back as set; the desk finds a booking by
// its id, code or guest, over a week.
func TestTheManagerEditsServicesAndVenues(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	boss := hs.token("boss", booking.RoleManager, hs.venueNum())
	staff := hs.token("sam", booking.RoleStaff, hs.venueNum())
	alice := hs.token("alice", booking.RoleUser, 0)

	var svc struct {
		ServiceID string `json:"service_id"`
		Status    string `json:"status"`
		Name      string `json:"name"`
	}
	hs.do(http.MethodPost, "/api/v1/admin/services", boss, set{"venue_id": hs.venue, "name": "Lesson", "duration_minutes": 60,
		"price_cents": 100, "resource_ids": []string{hs.res}}).expect(t, http.StatusCreated).decode(t, &svc)
	require.Equal(t, "active", svc.Status)
	start, _ := hs.slot(1, 10)
	holdService := func() reply {
		return hs.do(http.MethodPost, "/api/v1/holds", alice, set{"service_id": svc.ServiceID, "resource_id": hs.res, "start": start})
	}
	holdService().expect(t, http.StatusCreated)
	hs.do(http.MethodPatch, "/api/v1/admin/services/"+svc.ServiceID, boss, set{"status": "disabled", "name": "Old lesson"}).
		expect(t, http.StatusOK).decode(t, &svc)
	require.Equal(t, "disabled", svc.Status)
	require.Equal(t, "Old lesson", svc.Name)
	require.Equal(t, "resource_inactive", holdService().expect(t, http.StatusConflict).errorCode())
	hs.hold(alice, 1, 12) // the resource itself is still sold
	hs.do(http.MethodPatch, "/api/v1/admin/services/"+svc.ServiceID, staff, set{"status": "active"}).expect(t, http.StatusForbidden)
	r := hs.do(http.MethodPatch, "/api/v1/admin/services/"+svc.ServiceID, boss, set{"status": "off"}).expect(t, http.StatusUnprocessableEntity)
	require.Equal(t, "invalid_status", r.errorCode())

	var v venueResponse
	hs.do(http.MethodPatch, "/api/v1/admin/venues/"+hs.venue, boss, set{"name": "Court Club East"}).expect(t, http.StatusOK).decode(t, &v)
	require.Equal(t, "Court Club East", v.Name)
	hs.do(http.MethodPatch, "/api/v1/admin/venues/"+hs.venue, staff, set{"name": "Mine"}).expect(t, http.StatusForbidden)

	// The rules the forms start from.
	var sched struct {
		SlotMinutes int `json:"slot_minutes"`
		Weekly      []struct {
			Open, Close string
		} `json:"weekly"`
	}
	hs.do(http.MethodGet, "/api/v1/admin/resources/"+hs.res+"/schedule", staff, nil).expect(t, http.StatusOK).decode(t, &sched)
	require.Equal(t, 60, sched.SlotMinutes)
	require.Equal(t, "08:00", sched.Weekly[0].Open)
	var bare resourceResponse
	hs.do(http.MethodPost, "/api/v1/admin/resources", boss, set{"venue_id": hs.venue, "name": "New", "kind": "court", "capacity": 1,
		"price_cents": 0}).expect(t, http.StatusCreated).decode(t, &bare)
	hs.do(http.MethodGet, "/api/v1/admin/resources/"+bare.ResourceID+"/schedule", staff, nil).expect(t, http.StatusNotFound)

	var graces listResponse[struct {
		Category     string `json:"category"`
		GraceSeconds int    `json:"grace_seconds"`
	}]
	hs.do(http.MethodPut, "/api/v1/admin/policies/grace", hs.admin, set{"category": "tennis", "grace_seconds": 600}).expect(t, http.StatusOK)
	hs.do(http.MethodPut, "/api/v1/admin/policies/grace", hs.admin, set{"category": "golf", "grace_seconds": 60}).expect(t, http.StatusOK)
	hs.do(http.MethodGet, "/api/v1/admin/policies/grace", hs.admin, nil).expect(t, http.StatusOK).decode(t, &graces)
	require.Len(t, graces.Items, 2)
	require.Equal(t, "golf", graces.Items[0].Category)
	require.Equal(t, 600, graces.Items[1].GraceSeconds)
	hs.do(http.MethodGet, "/api/v1/admin/policies/grace", boss, nil).expect(t, http.StatusForbidden)

	// Search: by id, by code (any case), by guest; over the week from today.
	b := hs.booking(alice, 3, 15)
	bob := hs.booking(hs.token("bob", booking.RoleUser, 0), 1, 16)
	find := func(query string) []string {
		var list listResponse[bookingResponse]
		hs.do(http.MethodGet, "/api/v1/admin/bookings?"+query, staff, nil).expect(t, http.StatusOK).decode(t, &list)
		ids := []string{}
		for _, b := range list.Items {
			ids = append(ids, b.BookingID)
		}
		return ids
	}
	require.Equal(t, []string{b.BookingID}, find("q="+b.BookingID))
	require.Equal(t, []string{b.BookingID}, find("q="+b.CheckinCode))
	require.Equal(t, []string{bob.BookingID}, find("q=bob"))
	require.Empty(t, find("q=nobody"))
	today, _ := hs.slot(0, 10)
	require.Equal(t, []string{bob.BookingID, b.BookingID}, find("date="+today[:10]+"&days=7"), "newest first")
	require.Equal(t, []string{bob.BookingID}, find("date="+today[:10]+"&days=2"))
	for q, code := range map[string]string{"date=" + today[:10] + "&days=8": "invalid_days", "days=2": "invalid_days"} {
		r := hs.do(http.MethodGet, "/api/v1/admin/bookings?"+q, staff, nil).expect(t, http.StatusUnprocessableEntity)
		require.Equal(t, code, r.errorCode(), q)
	}
	require.Equal(t, "invalid_days", hs.do(http.MethodGet, "/api/v1/admin/bookings?days=x", staff, nil).expect(t, http.StatusBadRequest).errorCode())
}
