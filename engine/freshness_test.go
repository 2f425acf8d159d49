package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// Three instances share the backends; every admin change answered through the first is in force at
// once on the other two, whose copies of the catalog were warm: holds, confirms and availability
// decide with the new price, grace, closure, status and booking rules, 1,000 rounds in a row
// (docs/DESIGN.md "One catalog for all instances").
func TestAdminChangesAreInForceOnEveryInstance(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 5, 60, "08:00", "22:00")
	svc, err := tb.e.CreateService(ctx, booking.System, ServiceInput{VenueID: res.VenueID, Name: "Lesson", DurationMinutes: 60,
		ResourceIDs: []uint64{res.ID}, PriceCents: 100})
	require.NoError(t, err)
	others := []*Engine{tb.e, nil, nil}
	for i := 1; i < 3; i++ {
		others[i], err = New(tb.opts)
		require.NoError(t, err)
	}
	admin := tb.e
	day := at("10:00").AddDate(0, 0, 1) // tomorrow
	slot := func(h int) time.Time { return day.Add(time.Duration(h-10) * time.Hour) }
	date := day.In(shanghai).Format(booking.DayLayout)
	weekly := []booking.WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: "08:00", Close: "22:00"}}

	hold := func(e *Engine, user string, start time.Time) (booking.Hold, error) {
		return e.Hold(ctx, HoldRequest{UserID: user, ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	}
	drop := func(e *Engine, h booking.Hold) {
		_, err := e.CancelHold(ctx, booking.Actor{UserID: h.UserID, Role: booking.RoleUser}, h.ID)
		require.NoError(t, err)
	}
	// Warm every instance's copies, as a running instance's are.
	for _, e := range others {
		h, err := hold(e, "warm", slot(9))
		require.NoError(t, err)
		drop(e, h)
		_, err = e.Availability(ctx, AvailabilityQuery{ResourceID: res.ID, Date: date})
		require.NoError(t, err)
	}

	stale := 0
	var last error // the decision's error, for the report
	decide := func(round int, what string, ok bool) {
		if !ok {
			stale++
			t.Errorf("round %d: %s decided on a stale value (err: %v)", round, what, last)
		}
	}
	const rounds = 1000
	for round := range rounds {
		e := others[1+round%2] // the instance the guest's request reaches
		user := fmt.Sprintf("u%d", round)
		switch round % 5 {
		case 0: // price
			price := int64(1000 + round)
			_, err := admin.UpdateResource(ctx, booking.System, res.ID, ResourceChange{PriceCents: &price})
			require.NoError(t, err)
			h, err := hold(e, user, slot(11))
			require.NoError(t, err)
			last = err
			decide(round, "the hold's price", h.AmountCents == price)
			drop(e, h)
		case 1: // grace, through a confirm
			grace := 60 + round
			_, err := admin.SetGracePolicy(ctx, booking.System, GracePolicy{Category: "court", GraceSeconds: grace})
			require.NoError(t, err)
			h, err := hold(e, user, slot(12))
			require.NoError(t, err)
			a := booking.Actor{UserID: user, Role: booking.RoleUser}
			b, err := e.Confirm(ctx, a, h.ID)
			require.NoError(t, err)
			last = err
			decide(round, "the booking's release_at", b.ReleaseAt.Equal(slot(12).Add(time.Duration(grace)*time.Second)))
			_, err = e.CancelBooking(ctx, a, b.ID)
			require.NoError(t, err)
		case 2: // a closed day, then open again
			_, err := admin.SetSchedule(ctx, booking.System, res.ID, booking.ScheduleInput{SlotMinutes: 60, HorizonDays: 7, Weekly: weekly,
				Exceptions: []booking.ScheduleException{{Date: date, Closed: true}}})
			require.NoError(t, err)
			_, err = hold(e, user, slot(13))
			last = err
			decide(round, "a hold on the closed day", errorsIs(err, booking.ErrSlotClosed))
			av, err := others[1+(round+1)%2].Availability(ctx, AvailabilityQuery{ResourceID: res.ID, Date: date})
			require.NoError(t, err)
			last = err
			decide(round, "the closed day's availability", len(av) == 0 || !av[0].Available)
			_, err = admin.SetSchedule(ctx, booking.System, res.ID, booking.ScheduleInput{SlotMinutes: 60, HorizonDays: 7, Weekly: weekly})
			require.NoError(t, err)
			h, err := hold(e, user, slot(13))
			last = err
			decide(round, "a hold on the reopened day", err == nil)
			if err == nil {
				drop(e, h)
			}
		case 3: // the resource taken out of service, then back
			off, on := booking.CatalogDisabled, booking.CatalogActive
			_, err := admin.UpdateResource(ctx, booking.System, res.ID, ResourceChange{Status: &off})
			require.NoError(t, err)
			_, err = hold(e, user, slot(14))
			last = err
			decide(round, "a hold on a disabled resource", errorsIs(err, booking.ErrResourceInactive))
			_, err = admin.UpdateService(ctx, booking.System, svc.ID, ServiceChange{Status: &off})
			require.NoError(t, err)
			_, err = admin.UpdateResource(ctx, booking.System, res.ID, ResourceChange{Status: &on})
			require.NoError(t, err)
			_, err = e.Hold(ctx, HoldRequest{UserID: user, ServiceID: svc.ID, ResourceID: res.ID, Start: slot(14)})
			last = err
			decide(round, "a hold of a disabled service", errorsIs(err, booking.ErrResourceInactive))
			_, err = admin.UpdateService(ctx, booking.System, svc.ID, ServiceChange{Status: &on})
			require.NoError(t, err)
			h, err := hold(e, user, slot(14))
			last = err
			decide(round, "a hold on the resource back in service", err == nil)
			if err == nil {
				drop(e, h)
			}
		case 4: // a booking rule: the minimum notice
			notice := 3 * 24 * 60
			_, err := admin.SetResourcePolicy(ctx, booking.System, res.ID, booking.PolicyInput{MinNoticeMinutes: &notice})
			require.NoError(t, err)
			_, err = hold(e, user, slot(15))
			last = err
			decide(round, "a hold inside the minimum notice", errorsIs(err, booking.ErrTooSoon))
			zero := 0
			_, err = admin.SetResourcePolicy(ctx, booking.System, res.ID, booking.PolicyInput{MinNoticeMinutes: &zero})
			require.NoError(t, err)
			h, err := hold(e, user, slot(15))
			last = err
			decide(round, "a hold once the notice is lifted", err == nil)
			if err == nil {
				drop(e, h)
			}
		}
		if t.Failed() && stale > 20 {
			t.FailNow()
		}
	}
	require.Zero(t, stale, "decisions on a stale value in %d rounds", rounds)
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
