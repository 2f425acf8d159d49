package api

import (
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// Closing hours under a confirmed booking is 409 schedule_conflict naming it in
// error.details.booking_ids, unless the change says cancel_affected.
func TestScheduleChangeUnderBookingsOverHTTP(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	b := hs.booking(alice, 1, 10)
	day := b.Start[:10]
	closing := map[string]any{
		"slot_minutes": 60,
		"weekly":       []map[string]any{{"weekdays": []int{1, 2, 3, 4, 5, 6, 7}, "open": "08:00", "close": "22:00"}},
		"exceptions":   []map[string]any{{"date": day, "closed": true}},
		"horizon_days": 14,
	}
	path := "/api/v1/admin/resources/" + hs.res + "/schedule"
	var body struct {
		Error struct {
			Code    string         `json:"code"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	hs.do(http.MethodPut, path, hs.admin, closing).expect(t, http.StatusConflict).decode(t, &body)
	require.Equal(t, "schedule_conflict", body.Error.Code)
	require.Equal(t, []any{b.BookingID}, body.Error.Details["booking_ids"])

	closing["cancel_affected"] = true
	hs.do(http.MethodPut, path, hs.admin, closing).expect(t, http.StatusOK)
	var got bookingResponse
	hs.do(http.MethodGet, "/api/v1/bookings/"+b.BookingID, alice, nil).expect(t, http.StatusOK).decode(t, &got)
	require.Equal(t, "CANCELLED_BY_ADMIN", got.Status)
	var hist listResponse[historyEntryResponse]
	hs.do(http.MethodGet, "/api/v1/bookings/"+b.BookingID+"/history", alice, nil).expect(t, http.StatusOK).decode(t, &hist)
	require.Len(t, hist.Items, 2)
	require.Equal(t, "CANCELLED_BY_ADMIN", hist.Items[1].To)
	require.Equal(t, "admin:root", hist.Items[1].Actor)
}

// A payment_id already used for another hold is 409 payment_id_conflict; a second waitlist entry
// for the same window is 409 already_waiting.
func TestConflictCodesOverHTTP(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	bob := hs.token("bob", booking.RoleUser, 0)
	h1, h2 := hs.hold(alice, 1, 10), hs.hold(bob, 1, 10)
	now := hs.clock.Now()
	hs.notify(paymentBody(t, h1.HoldID, "pay-x", h1.AmountCents, now), testPaymentSecret, now).expect(t, http.StatusOK)
	r := hs.notify(paymentBody(t, h2.HoldID, "pay-x", h2.AmountCents, now), testPaymentSecret, now).expect(t, http.StatusConflict)
	require.Equal(t, "payment_id_conflict", r.errorCode())

	start, end := hs.slot(1, 12)
	join := map[string]any{"resource_id": hs.res, "start": start, "end": end}
	hs.do(http.MethodPost, "/api/v1/waitlist", bob, join).expect(t, http.StatusCreated)
	r = hs.do(http.MethodPost, "/api/v1/waitlist", bob, join).expect(t, http.StatusConflict)
	require.Equal(t, "already_waiting", r.errorCode())
}

// The front desk lists its venue's bookings of a day; staff of another venue may not.
func TestFrontDeskList(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	b := hs.booking(alice, 1, 10)
	hs.booking(alice, 2, 10)
	desk := hs.token("desk", booking.RoleStaff, hs.venueNum())
	var list listResponse[bookingResponse]
	hs.do(http.MethodGet, "/api/v1/admin/bookings?date="+b.Start[:10], desk, nil).expect(t, http.StatusOK).decode(t, &list)
	require.Len(t, list.Items, 1)
	require.Equal(t, b.BookingID, list.Items[0].BookingID)
	hs.do(http.MethodGet, "/api/v1/admin/bookings?status=RELEASED", desk, nil).expect(t, http.StatusOK).decode(t, &list)
	require.Empty(t, list.Items)
	r := hs.do(http.MethodGet, "/api/v1/admin/bookings?status=NOPE", desk, nil).expect(t, http.StatusUnprocessableEntity)
	require.Equal(t, "invalid_status", r.errorCode())
	other := hs.token("desk2", booking.RoleStaff, hs.venueNum()+1)
	hs.do(http.MethodGet, "/api/v1/admin/bookings?venue_id="+hs.venue, other, nil).expect(t, http.StatusForbidden)
	hs.do(http.MethodGet, "/api/v1/admin/bookings?venue_id="+strconv.FormatUint(hs.venueNum(), 10), hs.admin, nil).
		expect(t, http.StatusOK).decode(t, &list)
	require.Len(t, list.Items, 2)
	hs.do(http.MethodGet, "/api/v1/admin/bookings", alice, nil).expect(t, http.StatusForbidden)
}

// The handler main builds closes the dashboard's Redis connections when asked: main finds its
// Close through io.Closer.
func TestHandlerIsACloser(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	h, err := New(hs.opts)
	require.NoError(t, err)
	c, ok := h.(io.Closer)
	require.True(t, ok, "api.New's handler must be an io.Closer")
	require.NoError(t, c.Close())
}
