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

// TestUnfreezeLiftsANoshowFreeze: a guest frozen for no-shows is shown so, and an admin's unfreeze,
// with a reason, lets them book again at once; only new no-shows can freeze them again.
func TestUnfreezeLiftsANoshowFreeze(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	ctx := t.Context()
	hs.do(http.MethodPut, "/api/v1/admin/policies/noshow", hs.admin, set{"max_noshows": 1, "within_days": 30, "freeze_days": 7}).
		expect(t, http.StatusOK)
	alice := hs.token("alice", booking.RoleUser, 0)
	noshow := func(b bookingResponse) {
		t.Helper()
		at, err := time.Parse(time.RFC3339, b.ReleaseAt)
		require.NoError(t, err)
		id, _ := strconv.ParseUint(b.BookingID, 10, 64)
		hs.clock.Set(at)
		out, err := hs.eng.Release(ctx, release.Ref{BookingID: id, ReleaseAt: at})
		require.NoError(t, err)
		require.Equal(t, release.Released, out)
	}
	first, second, third := hs.booking(alice, 1, 9), hs.booking(alice, 1, 11), hs.booking(alice, 1, 13)
	noshow(first)
	noshow(second)
	alice, hs.admin = hs.token("alice", booking.RoleUser, 0), hs.token("root", booking.RoleAdmin, 0)

	var st standingResponse
	hs.do(http.MethodGet, "/api/v1/admin/users/alice", hs.admin, nil).expect(t, http.StatusOK).decode(t, &st)
	require.Equal(t, 2, st.Noshows)
	require.Equal(t, 2, st.Counted)
	require.True(t, st.Frozen)
	require.NotEmpty(t, st.FrozenUntil)
	require.Equal(t, "account_frozen", hs.holdReply(alice, 2, 10).expect(t, http.StatusForbidden).errorCode())

	staff := hs.token("sam", booking.RoleStaff, hs.venueNum())
	hs.do(http.MethodGet, "/api/v1/admin/users/alice", staff, nil).expect(t, http.StatusForbidden)
	hs.do(http.MethodPost, "/api/v1/admin/users/alice/unfreeze", staff, set{"reason": "x"}).expect(t, http.StatusForbidden)
	hs.do(http.MethodGet, "/api/v1/admin/users/no%20such", hs.admin, nil).expect(t, http.StatusNotFound)
	r := hs.do(http.MethodPost, "/api/v1/admin/users/alice/unfreeze", hs.admin, set{}).expect(t, http.StatusUnprocessableEntity)
	require.Equal(t, "reason_required", r.errorCode())

	hs.do(http.MethodPost, "/api/v1/admin/users/alice/unfreeze", hs.admin, set{"reason": "flat tyre, twice"}).
		expect(t, http.StatusOK).decode(t, &st)
	require.False(t, st.Frozen)
	require.Empty(t, st.FrozenUntil)
	require.Equal(t, 2, st.Noshows, "the record stays")
	require.Equal(t, 0, st.Counted, "but is pardoned")
	require.Equal(t, "admin:root", st.PardonedBy)
	require.Equal(t, "flat tyre, twice", st.PardonReason)
	hs.holdReply(alice, 2, 10).expect(t, http.StatusCreated)

	// One new no-show is within max_noshows 1; the pardon still stands after it.
	noshow(third)
	alice, hs.admin = hs.token("alice", booking.RoleUser, 0), hs.token("root", booking.RoleAdmin, 0)
	hs.do(http.MethodGet, "/api/v1/admin/users/alice", hs.admin, nil).expect(t, http.StatusOK).decode(t, &st)
	require.False(t, st.Frozen)
	require.Equal(t, 1, st.Counted)
	hs.holdReply(alice, 2, 12).expect(t, http.StatusCreated)
}
