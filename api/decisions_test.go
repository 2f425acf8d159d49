package api

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/release"
)

// TestTheVenueDecides: staff of the venue approve and decline bookings that wait for approval,
// cancel one for the venue and restore a released one on appeal; every action's reason is in the
// history, the units and refunds follow, and nobody else may take these decisions.
func TestTheVenueDecides(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, withCapacity(1))
	alice := hs.token("alice", booking.RoleUser, 0)
	staff := hs.token("sam", booking.RoleStaff, hs.venueNum())
	otherStaff := hs.token("olga", booking.RoleStaff, hs.venueNum()+1000)
	hs.do(http.MethodPut, "/api/v1/admin/resources/"+hs.res+"/policy", hs.admin, set{"requires_approval": true}).expect(t, http.StatusOK)

	first, second := hs.booking(alice, 1, 10), hs.paid(alice, 1, 11, "pay-2")
	require.Equal(t, "PENDING_APPROVAL", first.Status)
	require.NotEmpty(t, first.ApprovalDeadline)
	path := func(b bookingResponse, action string) string {
		return "/api/v1/admin/bookings/" + b.BookingID + "/" + action
	}

	// Only the venue's desk (or an admin) decides; a guest is refused, another venue sees nothing.
	hs.do(http.MethodPost, path(first, "approve"), alice, nil).expect(t, http.StatusForbidden)
	hs.do(http.MethodPost, path(first, "approve"), otherStaff, nil).expect(t, http.StatusNotFound)
	r := hs.do(http.MethodPost, path(first, "approve"), staff, set{"refund": "full"}).expect(t, http.StatusBadRequest)
	require.Equal(t, "unknown_field", r.errorCode(), "only a cancel takes refund")

	var b bookingResponse
	hs.do(http.MethodPost, path(first, "approve"), staff, nil).expect(t, http.StatusOK).decode(t, &b)
	require.Equal(t, "CONFIRMED", b.Status)
	require.Empty(t, b.ApprovalDeadline)
	r = hs.do(http.MethodPost, path(first, "approve"), staff, nil).expect(t, http.StatusConflict)
	require.Equal(t, "not_pending_approval", r.errorCode())

	// A decline needs a reason; it frees the slot and refunds the payment in full.
	r = hs.do(http.MethodPost, path(second, "decline"), staff, set{"reason": "  "}).expect(t, http.StatusUnprocessableEntity)
	require.Equal(t, "reason_required", r.errorCode())
	r = hs.do(http.MethodPost, path(second, "decline"), staff, set{"reason": string(make([]rune, 161))}).expect(t, http.StatusUnprocessableEntity)
	require.Equal(t, "invalid_reason", r.errorCode())
	hs.do(http.MethodPost, path(second, "decline"), staff, set{"reason": "court under repair"}, header{"Idempotency-Key", "d-1"}).
		expect(t, http.StatusOK).decode(t, &b)
	require.Equal(t, "DECLINED", b.Status)
	require.NotEmpty(t, b.CancelledAt)
	r = hs.do(http.MethodPost, path(second, "decline"), staff, set{"reason": "court under repair"}, header{"Idempotency-Key", "d-1"}).expect(t, http.StatusOK)
	require.NotEmpty(t, r.Header.Get(headerReplayed))
	require.Equal(t, []string{"PENDING_APPROVAL → DECLINED by staff:sam: declined: court under repair"}, hs.historyOf(second, "DECLINED"))
	refund := hs.refundOf(second)
	require.Equal(t, second.AmountCents, refund.AmountCents, "declined: refunded in full")
	again := hs.booking(alice, 1, 11) // the slot is free again
	require.Equal(t, "PENDING_APPROVAL", again.Status)

	// A cancel for the venue: in full by default, by the rules on request, with a reason.
	r = hs.do(http.MethodPost, path(again, "cancel"), staff, set{"reason": "rain", "refund": "half"}).expect(t, http.StatusUnprocessableEntity)
	require.Equal(t, "invalid_refund", r.errorCode())
	r = hs.do(http.MethodPost, path(again, "cancel"), staff, set{}).expect(t, http.StatusUnprocessableEntity)
	require.Equal(t, "reason_required", r.errorCode())
	hs.do(http.MethodPost, path(again, "cancel"), staff, set{"reason": "rain", "refund": "policy"}).expect(t, http.StatusOK).decode(t, &b)
	require.Equal(t, "CANCELLED_BY_ADMIN", b.Status)
	require.Equal(t, []string{"PENDING_APPROVAL → CANCELLED_BY_ADMIN by staff:sam: cancelled: rain"}, hs.historyOf(again, "CANCELLED_BY_ADMIN"))
	r = hs.do(http.MethodPost, path(first, "restore"), staff, set{"reason": "appeal"}).expect(t, http.StatusConflict)
	require.Equal(t, "invalid_transition", r.errorCode(), "a confirmed booking is not restored")

	// The approved booking is a no-show: released at start + grace, past the guest's own window,
	// and restored on appeal before its slot ends.
	releaseAt, err := time.Parse(time.RFC3339, hs.get(first).ReleaseAt)
	require.NoError(t, err)
	hs.clock.Set(releaseAt)
	id, _ := strconv.ParseUint(first.BookingID, 10, 64)
	out, err := hs.eng.Release(t.Context(), release.Ref{BookingID: id, ReleaseAt: releaseAt})
	require.NoError(t, err)
	require.Equal(t, release.Released, out)
	end, err := time.Parse(time.RFC3339, first.End)
	require.NoError(t, err)
	hs.clock.Set(end.Add(-time.Minute))
	alice, staff = hs.token("alice", booking.RoleUser, 0), hs.token("sam", booking.RoleStaff, hs.venueNum())
	r = hs.do(http.MethodPost, "/api/v1/bookings/"+first.BookingID+"/restore", alice, nil).expect(t, http.StatusConflict)
	require.Equal(t, "restore_window_closed", r.errorCode(), "the guest's own window is over")
	r = hs.do(http.MethodPost, path(first, "restore"), staff, nil).expect(t, http.StatusUnprocessableEntity)
	require.Equal(t, "reason_required", r.errorCode())
	hs.do(http.MethodPost, path(first, "restore"), staff, set{"reason": "stuck in traffic"}).expect(t, http.StatusOK).decode(t, &b)
	require.Equal(t, "CONFIRMED", b.Status)
	require.Empty(t, b.ReleasedAt)
	require.Equal(t, []string{"RELEASED → CONFIRMED by staff:sam: restored on appeal: stuck in traffic"}, hs.historyOf(first, "CONFIRMED")[1:])
	hs.clock.Set(end)
	staff = hs.token("sam", booking.RoleStaff, hs.venueNum())
	hs.do(http.MethodPost, path(first, "cancel"), staff, set{"reason": "over"}).expect(t, http.StatusOK) // an admin cancel stays possible
}

// paid is a booking of user's, paid through a signed payment notification.
func (hs *harness) paid(user string, days, hour int, paymentID string) bookingResponse {
	hs.t.Helper()
	h := hs.hold(user, days, hour)
	var res paymentResponse
	hs.notify(paymentBody(hs.t.(*testing.T), h.HoldID, paymentID, h.AmountCents, hs.clock.Now()), testPaymentSecret, hs.clock.Now()).
		expect(hs.t, http.StatusOK).decode(hs.t, &res)
	require.NotNil(hs.t, res.Booking, "%+v", res)
	return *res.Booking
}

// get reads booking b as an admin.
func (hs *harness) get(b bookingResponse) bookingResponse {
	hs.t.Helper()
	var out bookingResponse
	hs.do(http.MethodGet, "/api/v1/bookings/"+b.BookingID, hs.token("root", booking.RoleAdmin, 0), nil).
		expect(hs.t, http.StatusOK).decode(hs.t, &out)
	return out
}

// historyOf is b's history rows into status to, as "FROM → TO by actor: reason".
func (hs *harness) historyOf(b bookingResponse, to string) []string {
	hs.t.Helper()
	var list listResponse[historyEntryResponse]
	hs.do(http.MethodGet, "/api/v1/bookings/"+b.BookingID+"/history", hs.token("root", booking.RoleAdmin, 0), nil).
		expect(hs.t, http.StatusOK).decode(hs.t, &list)
	var out []string
	for _, h := range list.Items {
		if h.To == to {
			out = append(out, h.From+" → "+h.To+" by "+h.Actor+": "+h.Reason)
		}
	}
	return out
}

// refundOf is b's one refund.
func (hs *harness) refundOf(b bookingResponse) refundResponse {
	hs.t.Helper()
	var list listResponse[refundResponse]
	hs.do(http.MethodGet, "/api/v1/admin/refunds", hs.token("root", booking.RoleAdmin, 0), nil).expect(hs.t, http.StatusOK).decode(hs.t, &list)
	var out []refundResponse
	for _, r := range list.Items {
		if r.BookingID != nil && *r.BookingID == b.BookingID {
			out = append(out, r)
		}
	}
	require.Len(hs.t, out, 1, "refunds of booking %s: %+v", b.BookingID, list.Items)
	return out[0]
}
