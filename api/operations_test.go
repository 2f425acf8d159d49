package api

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// TestOperationsPage: a release coming up is listed as due soon, the same one still undecided after
// release_at as overdue; only admins see the page; the task routes answer without a queue too.
func TestOperationsPage(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	b := hs.booking(alice, 1, 10)
	releaseAt, err := time.Parse(time.RFC3339, b.ReleaseAt)
	require.NoError(t, err)

	var ops struct {
		DueSoon []bookingResponse `json:"releases_due_soon"`
		Overdue []bookingResponse `json:"releases_overdue"`
	}
	hs.do(http.MethodGet, "/api/v1/admin/operations", hs.admin, nil).expect(t, http.StatusOK).decode(t, &ops)
	require.Empty(t, ops.DueSoon, "a day ahead is not soon")
	hs.clock.Set(releaseAt.Add(-10 * time.Minute))
	hs.admin = hs.token("root", booking.RoleAdmin, 0)
	hs.do(http.MethodGet, "/api/v1/admin/operations?venue_id="+hs.venue, hs.admin, nil).expect(t, http.StatusOK).decode(t, &ops)
	require.Len(t, ops.DueSoon, 1)
	require.Equal(t, b.BookingID, ops.DueSoon[0].BookingID)
	require.Empty(t, ops.Overdue)
	hs.do(http.MethodGet, "/api/v1/admin/operations?venue_id=999999", hs.admin, nil).expect(t, http.StatusOK).decode(t, &ops)
	require.Empty(t, ops.DueSoon, "another venue's page")

	hs.clock.Set(releaseAt.Add(time.Minute)) // nothing released it: no loop runs in this harness
	hs.admin = hs.token("root", booking.RoleAdmin, 0)
	hs.do(http.MethodGet, "/api/v1/admin/operations", hs.admin, nil).expect(t, http.StatusOK).decode(t, &ops)
	require.Empty(t, ops.DueSoon)
	require.Len(t, ops.Overdue, 1)
	require.Equal(t, b.BookingID, ops.Overdue[0].BookingID)

	staff := hs.token("sam", booking.RoleStaff, hs.venueNum())
	hs.do(http.MethodGet, "/api/v1/admin/operations", staff, nil).expect(t, http.StatusForbidden)
	hs.do(http.MethodGet, "/api/v1/admin/tasks?state=archived", staff, nil).expect(t, http.StatusForbidden)
	var tasks listResponse[taskResponse]
	hs.do(http.MethodGet, "/api/v1/admin/tasks?state=archived", hs.admin, nil).expect(t, http.StatusOK).decode(t, &tasks)
	require.Empty(t, tasks.Items)
	r := hs.do(http.MethodGet, "/api/v1/admin/tasks?state=dead", hs.admin, nil).expect(t, http.StatusUnprocessableEntity)
	require.Equal(t, "invalid_status", r.errorCode())
	hs.do(http.MethodPost, "/api/v1/admin/tasks/q/t/redrive", hs.admin, nil).expect(t, http.StatusNotFound)
}
