package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/wire"
	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/internal/testenv/fleet"
)

// freshnessRounds is how many admin changes the freshness check makes, each followed at once by a
// decision through another instance.
const freshnessRounds = 1000

// Three instances of the binary on one MySQL database and one Redis: every admin change answered
// through the first is in force at once on the other two (docs/API.md, "Admin changes are in force
// everywhere once answered").
func TestAdminChangesOnThreeInstances(t *testing.T) {
	needServers(t)
	f := fleet.Start(t, fleet.Options{Instances: 3})
	adminChangesInForce(t, f, freshnessRounds)
}

// adminChangesInForce changes a court's price, its category's grace, its opening hours, its status
// and its booking rules through instance 0, and decides through instances 1 and 2 right after each
// answer — a hold, a payment, an availability read — as a guest who tries the change from the app
// at once: rounds decisions in a row, none on the value from before the change. Every instance's
// copy of the catalog is warm, as a running instance's is.
func adminChangesInForce(t *testing.T, f *fleet.Fleet, rounds int) {
	ctx := context.Background()
	admin := f.Token("fresh-admin", "admin", "")
	c0 := f.Client(0)
	venue, err := c0.CreateVenue(ctx, admin, "Fresh courts", "Asia/Shanghai")
	require.NoError(t, err)
	category := testenv.Unique("fresh")
	res, err := c0.CreateResource(ctx, admin, fleet.Resource{VenueID: venue.ID, Name: "Court", Capacity: 5, Category: category, PriceCents: 100})
	require.NoError(t, err)
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	// Tomorrow's slots for holds and closures; the day after's for bookings, so that closing
	// tomorrow never meets one.
	now := time.Now().In(shanghai)
	tomorrow := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, shanghai)
	closed := tomorrow.Format("2006-01-02")
	schedule := func(closeTomorrow bool) error {
		body := map[string]any{"slot_minutes": 60, "horizon_days": 3,
			"weekly": []map[string]any{{"weekdays": []int{1, 2, 3, 4, 5, 6, 7}, "open": "00:00", "close": "24:00"}}}
		if closeTomorrow {
			body["exceptions"] = []map[string]any{{"date": closed, "closed": true}}
		}
		return c0.Do(ctx, http.MethodPut, "/api/v1/admin/resources/"+res.ID+"/schedule", admin, body, nil)
	}
	require.NoError(t, schedule(false))
	patch := func(change map[string]any) error {
		return c0.Do(ctx, http.MethodPatch, "/api/v1/admin/resources/"+res.ID, admin, change, nil)
	}
	policy := func(minNotice int) error {
		return c0.Do(ctx, http.MethodPut, "/api/v1/admin/resources/"+res.ID+"/policy", admin,
			map[string]any{"min_notice_minutes": minNotice}, nil)
	}
	hold := func(c *fleet.Client, user string, start time.Time) (wire.Hold, error) {
		return c.Hold(ctx, f.Token(user, "user", ""), res.ID, start, start.Add(time.Hour), 1)
	}
	drop := func(c *fleet.Client, user string, h wire.Hold) {
		require.NoError(t, c.Do(ctx, http.MethodDelete, "/api/v1/holds/"+h.HoldID, f.Token(user, "user", ""), nil, nil))
	}
	for i := range 3 { // warm every instance's copies
		c := f.Client(i)
		h, err := hold(c, "warm", tomorrow.Add(23*time.Hour))
		require.NoError(t, err)
		drop(c, "warm", h)
		_, err = c.SlotAt(ctx, res.ID, tomorrow.Add(23*time.Hour))
		require.NoError(t, err)
	}

	stale := 0
	decide := func(round int, what string, ok bool, err error) {
		if !ok {
			stale++
			t.Errorf("round %d: %s decided on a stale value (err: %v)", round, what, err)
		}
	}
	refused := func(err error, code string) bool {
		var apiErr *fleet.APIError
		return errors.As(err, &apiErr) && apiErr.Code == code
	}
	for round := range rounds {
		c := f.Client(1 + round%2) // the instance the guest's request reaches
		other := f.Client(1 + (round+1)%2)
		user := fmt.Sprintf("fresh-%d", round)
		hour := time.Duration(round/5%20) * time.Hour // spread over the day's slots
		switch round % 5 {
		case 0: // price
			price := int64(1000 + round)
			require.NoError(t, patch(map[string]any{"price_cents": price}))
			h, err := hold(c, user, tomorrow.Add(hour))
			require.NoError(t, err)
			decide(round, "the hold's price", h.AmountCents == price, err)
			drop(c, user, h)
		case 1: // grace, through a payment
			grace := 60 + round
			require.NoError(t, c0.SetGrace(ctx, admin, category, grace))
			start := tomorrow.AddDate(0, 0, 1).Add(hour)
			h, err := hold(c, user, start)
			require.NoError(t, err)
			p, err := c.Pay(ctx, h, testenv.Unique("fresh-pay-"))
			require.NoError(t, err)
			require.Equal(t, "booked", p.Outcome)
			releaseAt, err := time.Parse(time.RFC3339, p.Booking.ReleaseAt)
			require.NoError(t, err)
			decide(round, "the booking's release_at", releaseAt.Equal(start.Add(time.Duration(grace)*time.Second)), err)
			require.NoError(t, c.Do(ctx, http.MethodPost, "/api/v1/bookings/"+p.Booking.BookingID+"/cancel", f.Token(user, "user", ""),
				map[string]any{}, nil))
		case 2: // a closed day, then open again
			require.NoError(t, schedule(true))
			_, err := hold(c, user, tomorrow.Add(hour))
			decide(round, "a hold on the closed day", refused(err, "slot_closed"), err)
			slot, err := other.SlotAt(ctx, res.ID, tomorrow.Add(hour))
			decide(round, "the closed day's availability", err != nil || !slot.Available, err)
			require.NoError(t, schedule(false))
			h, err := hold(c, user, tomorrow.Add(hour))
			decide(round, "a hold on the reopened day", err == nil, err)
			if err == nil {
				drop(c, user, h)
			}
		case 3: // out of service, then back
			require.NoError(t, patch(map[string]any{"status": "disabled"}))
			_, err := hold(c, user, tomorrow.Add(hour))
			decide(round, "a hold on a disabled resource", refused(err, "resource_inactive"), err)
			require.NoError(t, patch(map[string]any{"status": "active"}))
			h, err := hold(other, user, tomorrow.Add(hour))
			decide(round, "a hold on the resource back in service", err == nil, err)
			if err == nil {
				drop(other, user, h)
			}
		case 4: // a booking rule: the minimum notice
			require.NoError(t, policy(3*24*60))
			_, err := hold(c, user, tomorrow.Add(hour))
			decide(round, "a hold inside the minimum notice", refused(err, "too_soon"), err)
			require.NoError(t, policy(0))
			h, err := hold(other, user, tomorrow.Add(hour))
			decide(round, "a hold once the notice is lifted", err == nil, err)
			if err == nil {
				drop(other, user, h)
			}
		}
		if stale > 20 {
			t.FailNow()
		}
	}
	require.Zero(t, stale, "decisions on a stale value in %d rounds", rounds)
}
