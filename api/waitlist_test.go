package api

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
)

// TestWaitlistOverHTTP: a user waiting for a full slot is promoted to a hold when its owner cancels;
// the entries, and every answer, follow openapi.json.
func TestWaitlistOverHTTP(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, withCapacity(1))
	alice := hs.token("alice", booking.RoleUser, 0)
	bob := hs.token("bob", booking.RoleUser, 0)
	b := hs.booking(alice, 1, 10)
	start, end := hs.slot(1, 10)

	var entry waitlistResponse
	hs.do(http.MethodPost, "/api/v1/waitlist", bob, map[string]any{"resource_id": hs.res, "start": start, "end": end}).
		expect(t, http.StatusCreated).decode(t, &entry)
	require.Equal(t, string(booking.WaitWaiting), entry.Status)
	hs.do(http.MethodDelete, "/api/v1/waitlist/"+entry.WaitlistID, alice, nil).expect(t, http.StatusNotFound)

	hs.do(http.MethodPost, "/api/v1/bookings/"+b.BookingID+"/cancel", alice, nil).expect(t, http.StatusOK)
	var list listResponse[waitlistResponse]
	hs.do(http.MethodGet, "/api/v1/waitlist", bob, nil).expect(t, http.StatusOK).decode(t, &list)
	require.Len(t, list.Items, 1)
	require.Equal(t, string(booking.WaitPromoted), list.Items[0].Status)
	require.NotEmpty(t, list.Items[0].HoldID)
	var h holdResponse
	hs.do(http.MethodGet, "/api/v1/holds/"+list.Items[0].HoldID, bob, nil).expect(t, http.StatusOK).decode(t, &h)
	require.Equal(t, string(booking.HoldHeld), h.Status)

	// Bob lets the hold run out: his entry has lapsed, and the list (checked against openapi.json)
	// says LAPSED.
	hs.clock.Advance(11 * time.Minute) // past the engine's default hold TTL of 10 minutes
	require.NoError(t, hs.eng.NewLoops(engine.LoopsConfig{}).RunOnce(context.Background()))
	hs.do(http.MethodGet, "/api/v1/waitlist", bob, nil).expect(t, http.StatusOK).decode(t, &list)
	require.Len(t, list.Items, 1)
	require.Equal(t, string(booking.WaitLapsed), list.Items[0].Status)

	// Joining for a window that is free promotes at once.
	s2, e2 := hs.slot(1, 11)
	hs.do(http.MethodPost, "/api/v1/waitlist", alice, map[string]any{"resource_id": hs.res, "start": s2, "end": e2}).
		expect(t, http.StatusCreated).decode(t, &entry)
	require.Equal(t, string(booking.WaitPromoted), entry.Status)
	hs.do(http.MethodDelete, "/api/v1/waitlist/"+entry.WaitlistID, alice, nil).expect(t, http.StatusOK).decode(t, &entry)
	require.Equal(t, string(booking.WaitPromoted), entry.Status, "a promoted entry keeps its hold")
}
