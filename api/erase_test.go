package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// POST /api/v1/admin/users/{id}/erase: admins only; a path that cannot name a user is 404, the
// engine's own name 422; the answer counts what carries the pseudonym, the same on a repeat and on a
// replay; afterwards the user sees nothing of theirs, the booking stands under the pseudonym, and
// nobody can sign in as the pseudonym.
func TestEraseUserRoute(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	staff := hs.token("sam", booking.RoleStaff, hs.venueNum())
	h := hs.hold(alice, 1, 11)
	var b bookingResponse
	hs.do(http.MethodPost, "/api/v1/holds/"+h.HoldID+"/confirm", alice, nil, header{headerIdempotencyKey, "confirm-1"}).
		expect(t, http.StatusCreated).decode(t, &b)
	require.Equal(t, "alice", b.UserID)
	const path = "/api/v1/admin/users/alice/erase"
	pseudonym := booking.Pseudonym(testErasureKey, "alice")

	hs.do(http.MethodPost, path, "", nil).expect(t, http.StatusUnauthorized)
	for _, tok := range []string{alice, staff} {
		r := hs.do(http.MethodPost, path, tok, nil).expect(t, http.StatusForbidden)
		require.Equal(t, "forbidden", r.errorCode())
	}
	for _, bad := range []string{"bad%20id", "semi;colon", strings.Repeat("x", 129), pseudonym} {
		r := hs.do(http.MethodPost, "/api/v1/admin/users/"+bad+"/erase", hs.admin, nil).expect(t, http.StatusNotFound)
		require.Equal(t, "not_found", r.errorCode(), bad)
	}
	r := hs.do(http.MethodPost, "/api/v1/admin/users/"+booking.ActorSystem+"/erase", hs.admin, nil).expect(t, http.StatusUnprocessableEntity)
	require.Equal(t, "invalid_user_id", r.errorCode())
	r = hs.do(http.MethodPost, path, hs.admin, set{"reason": "asked"}).expect(t, http.StatusBadRequest)
	require.Equal(t, "unknown_field", r.errorCode())
	var still bookingResponse
	hs.do(http.MethodGet, "/api/v1/bookings/"+b.BookingID, alice, nil).expect(t, http.StatusOK).decode(t, &still)
	require.Equal(t, "alice", still.UserID, "nothing was erased by the refused requests")

	var got erasedResponse
	first := hs.do(http.MethodPost, path, hs.admin, nil).expect(t, http.StatusOK).decode(t, &got)
	require.Equal(t, erasedResponse{Pseudonym: pseudonym, Erased: erasedCounts{Bookings: 1, Events: 1, StoredAnswers: 1}}, got,
		"the booking, its booking.confirmed event and alice's stored answer to her confirm")
	require.NotContains(t, string(first.Body), `"alice"`)
	again := hs.do(http.MethodPost, path, hs.admin, set{}).expect(t, http.StatusOK)
	require.JSONEq(t, string(first.Body), string(again.Body), "a repeat answers the same")
	keyed := hs.do(http.MethodPost, path, hs.admin, nil, header{headerIdempotencyKey, "erase-alice"}).expect(t, http.StatusOK)
	replay := hs.do(http.MethodPost, path, hs.admin, nil, header{headerIdempotencyKey, "erase-alice"}).expect(t, http.StatusOK)
	require.Equal(t, "true", replay.Header.Get(headerReplayed))
	require.Equal(t, keyed.Body, replay.Body)

	var mine listResponse[bookingResponse]
	hs.do(http.MethodGet, "/api/v1/bookings", alice, nil).expect(t, http.StatusOK).decode(t, &mine)
	require.Empty(t, mine.Items, "alice starts afresh")
	hs.do(http.MethodGet, "/api/v1/bookings/"+b.BookingID, alice, nil).expect(t, http.StatusNotFound)
	var kept bookingResponse
	hs.do(http.MethodGet, "/api/v1/bookings/"+b.BookingID, hs.admin, nil).expect(t, http.StatusOK).decode(t, &kept)
	require.Equal(t, pseudonym, kept.UserID)
	require.Equal(t, "CONFIRMED", kept.Status)
	replayed := hs.do(http.MethodPost, "/api/v1/holds/"+h.HoldID+"/confirm", alice, nil, header{headerIdempotencyKey, "confirm-1"}).
		expect(t, http.StatusCreated)
	require.NotContains(t, string(replayed.Body), `"alice"`, "the stored answer was erased too")

	// Nobody becomes the pseudonym: not by dev log-in, not with a token.
	r = hs.do(http.MethodPost, "/api/v1/auth/dev-login", "", set{"user_id": pseudonym}).expect(t, http.StatusUnprocessableEntity)
	require.Equal(t, "invalid_user_id", r.errorCode())
	hs.do(http.MethodGet, "/api/v1/bookings", hs.token(pseudonym, booking.RoleUser, 0), nil).expect(t, http.StatusUnauthorized)
}
