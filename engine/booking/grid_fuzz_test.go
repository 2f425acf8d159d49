package booking

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fuzzZones are venue zones that are hard on a wall-time grid: DST of an hour and of half an hour
// (Lord Howe), transitions at midnight (Havana, Santiago, Beirut, Cairo), a day that never happened
// (Apia skipped 2011-12-30), and offsets of :30 and :45.
var fuzzZones = []string{"UTC", "Asia/Shanghai", "America/New_York", "Europe/London", "Australia/Lord_Howe",
	"America/Havana", "America/Santiago", "Asia/Beirut", "Africa/Cairo", "Pacific/Apia", "Pacific/Chatham",
	"America/St_Johns", "Asia/Kathmandu"}

type fuzzZone struct {
	loc *time.Location
	// shifts are the venue-local days on which the zone's offset changed, 2010 to 2030: the days a
	// grid is most likely to get wrong.
	shifts []time.Time
}

var (
	fuzzZonesOnce sync.Once
	fuzzZoneList  []fuzzZone
)

// zoneFor picks one of fuzzZones by a fuzzed byte.
func zoneFor(t testing.TB, i uint8) fuzzZone {
	fuzzZonesOnce.Do(func() {
		for _, name := range fuzzZones {
			loc, err := time.LoadLocation(name)
			if err != nil {
				panic(err)
			}
			z := fuzzZone{loc: loc}
			from, until := time.Date(2010, 1, 1, 0, 0, 0, 0, loc), time.Date(2030, 1, 1, 0, 0, 0, 0, loc)
			for at := from; at.Before(until); {
				_, end := at.ZoneBounds()
				if end.IsZero() {
					break
				}
				z.shifts = append(z.shifts, LocalDay(end, loc))
				at = end
			}
			fuzzZoneList = append(fuzzZoneList, z)
		}
	})
	t.Helper()
	return fuzzZoneList[int(i)%len(fuzzZoneList)]
}

// clockString writes minutes after midnight as HH:MM.
func clockString(m int) string { return fmt.Sprintf("%02d:%02d", m/60, m%60) }

// FuzzParseClock: every time of day ParseClock accepts lies in 00:00–24:00 and is written exactly as
// the canonical HH:MM of its value, so that a schedule stored and shown again reads the same.
func FuzzParseClock(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseClock(s)
		if err != nil {
			require.Zero(t, c)
			return
		}
		require.True(t, c >= 0 && c <= 1440, "%q parsed to %d minutes", s, c)
		require.Equal(t, clockString(int(c)), s, "%q is not the HH:MM of what it parsed to", s)
	})
}

// scheduleBody is a schedule as the API's body carries it.
type scheduleBody struct {
	SlotMinutes int                 `json:"slot_minutes"`
	Weekly      []WeeklyRule        `json:"weekly"`
	Exceptions  []ScheduleException `json:"exceptions"`
	HorizonDays int                 `json:"horizon_days"`
}

// planCodes are the codes BuildPlan refuses a schedule with.
var planCodes = []string{"invalid_slot_minutes", "invalid_horizon_days", "invalid_weekdays", "invalid_time_of_day",
	"invalid_opening", "invalid_date", "duplicate_exception", "invalid_exception", "overlapping_openings"}

// FuzzBuildPlan feeds BuildPlan schedules (as JSON bodies) in every zone of fuzzZones. A refusal is a
// KindInvalid error with one of planCodes that names a field; an accepted schedule lays out, on any
// venue-local day (DST days and exception dates included), slots that are whole minutes, in order,
// no longer than the grid's step, never overlapping each other or the next day's, that cover exactly
// the opening's wall times, and that Window finds again.
func FuzzBuildPlan(f *testing.F) {
	f.Fuzz(func(t *testing.T, body string, zone uint8, shift uint16, day int32) {
		var in scheduleBody
		if json.Unmarshal([]byte(body), &in) != nil {
			return // not a schedule: the API refuses it before the engine sees it
		}
		p, err := BuildPlan(ScheduleInput(in))
		if err != nil {
			e, ok := AsError(err)
			require.True(t, ok, "%v is not a domain error", err)
			require.Equal(t, KindInvalid, e.Kind, "%v", err)
			require.Contains(t, planCodes, e.Code, "%v", err)
			require.NotEmpty(t, e.Field, "%v names no field", err)
			return
		}
		require.True(t, p.SlotMinutes() >= 1 && p.SlotMinutes() <= 1440, "slot_minutes %d", p.SlotMinutes())
		require.True(t, p.HorizonDays() >= 1 && p.HorizonDays() <= 366, "horizon_days %d", p.HorizonDays())
		z := zoneFor(t, zone)
		// A day within about 110 years of 2000: a grid's days further off are never generated.
		days := []time.Time{time.Date(2000, 1, 1+int(day%40000), 0, 0, 0, 0, z.loc)}
		if len(z.shifts) > 0 {
			days = append(days, z.shifts[int(shift)%len(z.shifts)])
		}
		for i, x := range in.Exceptions {
			if d, err := time.ParseInLocation(DayLayout, x.Date, z.loc); err == nil && i < 4 {
				days = append(days, d)
			}
		}
		for _, d := range days {
			checkDay(t, p, d, z.loc)
		}
	})
}

// checkDay checks the grid of one venue-local day (and its border with the next).
func checkDay(t *testing.T, p *Plan, day time.Time, loc *time.Location) {
	t.Helper()
	name := day.Format(DayLayout)
	slots := p.DaySlots(day, loc)
	require.Equal(t, slots, p.layDay(day, name, loc), "%s: the memo answers what the grid lays out", name)
	step := time.Duration(p.SlotMinutes()) * time.Minute
	wholeMinutes := day.Year() >= 2000 // zones kept offsets of seconds until the 1970s
	for i, s := range slots {
		require.Equal(t, name, s.Day, "%s: slot %d names another day", name, i)
		require.True(t, s.Start.Before(s.End), "%s: slot %d %v–%v is empty", name, i, s.Start, s.End)
		require.LessOrEqual(t, s.End.Sub(s.Start), step, "%s: slot %d is longer than the grid's step", name, i)
		if i > 0 {
			require.False(t, s.Start.Before(slots[i-1].End), "%s: slot %d overlaps the one before", name, i)
		}
		if wholeMinutes {
			require.Zero(t, s.Start.Unix()%60, "%s: slot %d starts inside a minute (its field would be ambiguous)", name, i)
		}
	}

	// Each opening is covered exactly: from its open to its last whole step, without a gap, and
	// the wall times those instants stand for are the right ones.
	ivs, ok := p.exceptions[name]
	if !ok {
		ivs = p.weekly[IsoWeekday(day)]
	}
	y, m, d := day.Date()
	next := 0
	for _, iv := range ivs {
		steps := (int(iv.close) - int(iv.open)) / p.SlotMinutes()
		last := int(iv.open) + steps*p.SlotMinutes()
		from, to := wallInstant(y, m, d, int(iv.open), loc), wallInstant(y, m, d, last, loc)
		checkWall(t, y, m, d, int(iv.open), loc, from)
		checkWall(t, y, m, d, last, loc, to)
		for at := from; at.Before(to); next++ {
			require.Less(t, next, len(slots), "%s: opening %s–%s is not covered to its end", name, clockString(int(iv.open)), clockString(last))
			require.True(t, slots[next].Start.Equal(at), "%s: a gap in opening %s–%s at %v", name, clockString(int(iv.open)), clockString(last), at)
			at = slots[next].End
			require.False(t, at.After(to), "%s: a slot runs past the opening's end", name)
		}
	}
	require.Equal(t, len(slots), next, "%s: slots outside every opening", name)

	// The next day starts after this one ends.
	if after := p.DaySlots(day.AddDate(0, 0, 1), loc); len(slots) > 0 && len(after) > 0 {
		require.False(t, after[0].Start.Before(slots[len(slots)-1].End), "%s: the next day's first slot overlaps this day's last", name)
	}

	// Window finds a run of the day's slots again, and says whether it has a gap.
	if len(slots) > 0 {
		i, j := len(slots)/3, len(slots)-1-len(slots)/4
		got, ok := p.Window(slots[i].Start, slots[j].End, loc)
		require.Equal(t, slots[i:j+1], got, "%s: Window finds other slots than the day's", name)
		contiguous := true
		for k := i + 1; k <= j; k++ {
			contiguous = contiguous && slots[k].Start.Equal(slots[k-1].End)
		}
		require.Equal(t, contiguous, ok, "%s: Window's gap verdict", name)
	}
}

// checkWall checks that at is the instant of the wall time y-m-d + minute in loc: that wall time's
// first occurrence, or, when the clocks skip it, the moment they jump over it.
func checkWall(t *testing.T, y int, m time.Month, d, minute int, loc *time.Location, at time.Time) {
	t.Helper()
	want := time.Date(y, m, d, 0, minute, 0, 0, time.UTC)
	wall := func(x time.Time) time.Time {
		l := x.In(loc)
		return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
	}
	start, _ := at.ZoneBounds()
	if wall(at).Equal(want) {
		if start.IsZero() {
			return
		}
		_, was := start.Add(-time.Nanosecond).Zone()
		_, is := at.Zone()
		if earlier := at.Add(-time.Duration(was-is) * time.Second); was > is && earlier.Before(start) {
			require.False(t, wall(earlier).Equal(want), "%v: %v is the repeated occurrence, not the first", want, at)
		}
		return
	}
	require.True(t, at.Equal(start), "%v: %v reads %v and is no zone boundary", want, at, wall(at))
	require.True(t, wall(at.Add(-time.Nanosecond)).Before(want) && wall(at).After(want),
		"%v: the clocks do not jump over it at %v", want, at)
}

// placeCodes are the codes Place refuses a hold with.
var placeCodes = []string{"resource_inactive", "slot_closed", "invalid_quantity", "invalid_end", "missing_end",
	"invalid_window", "slot_past", "off_grid", "too_far", "too_soon"}

// FuzzPlace places hold requests — any instants of the years the API takes, any quantity — on fuzzed
// grids, resources and services in the zones of fuzzZones. A refusal is a KindInvalid or KindConflict
// error with one of placeCodes. An accepted request is on the grid, not over, within the hold's
// limits, priced by its own slots, and its slots are the contiguous run that covers its physical
// window (what the hold script then takes). And what availability offers can be held: a candidate
// the availability judge calls open places on exactly the slots it showed.
func FuzzPlace(f *testing.F) {
	f.Fuzz(func(t *testing.T, zone uint8, slot, open, close, horizon, capacity uint16, price int64, dur, prep, cleanup int16,
		minNotice, maxDays uint16, startSec int64, nanos uint32, length int64, beforeNow int32, qty int) {
		z := zoneFor(t, zone)
		plan, err := BuildPlan(ScheduleInput{SlotMinutes: int(slot), HorizonDays: int(horizon), Weekly: []WeeklyRule{{
			Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: clockString(int(open % 1441)), Close: clockString(int(close % 1441))}}})
		if err != nil {
			return // FuzzBuildPlan's business
		}
		if CheckRange(FieldCapacity, int64(capacity)) != nil || CheckRange(FieldPriceCents, price) != nil {
			return // refused when the resource is created
		}
		o := Offer{ResourceID: 1, Capacity: int(capacity), PriceCents: price, Active: true, Plan: plan, Loc: z.loc}
		if dur >= 0 {
			if CheckRange(FieldDurationMinutes, int64(dur)) != nil || CheckRange(FieldPrepMinutes, int64(prep)) != nil ||
				CheckRange(FieldCleanupMinutes, int64(cleanup)) != nil {
				return // refused when the service is created
			}
			o.Service = &ServiceTerms{ID: 2, Duration: time.Duration(dur) * time.Minute, Prep: time.Duration(prep) * time.Minute,
				Cleanup: time.Duration(cleanup) * time.Minute, PriceCents: price}
		}
		mn, md := int(minNotice), int(maxDays)
		if o.Policy, err = DefaultPolicy().With(PolicyInput{MinNoticeMinutes: &mn, MaxDaysAhead: &md}); err != nil {
			return // refused when the policy is set
		}
		inYears := func(x time.Time) bool { return x.Year() >= 2000 && x.Year() <= 9999 } // what the API parses
		start := time.Unix(startSec, int64(nanos%1e9))
		var end time.Time
		if length != 0 {
			end = start.Add(time.Duration(length%(1<<32)) * time.Second)
		}
		now := start.Add(time.Duration(beforeNow) * time.Second)
		if !inYears(start) || (!end.IsZero() && !inYears(end)) || !inYears(now) {
			return
		}
		q, err := Quantity(qty) // the engine checks the quantity before it places
		if err != nil {
			require.ErrorIs(t, err, Invalid("invalid_quantity", ""))
			return
		}

		p, err := o.Place(start, end, q, now)
		if err != nil {
			e, ok := AsError(err)
			require.True(t, ok, "%v is not a domain error", err)
			require.Contains(t, []Kind{KindInvalid, KindConflict}, e.Kind, "%v", err)
			require.Contains(t, placeCodes, e.Code, "%v", err)
		} else {
			checkPlacement(t, o, p, start, end, q, now)
		}
		checkAvailabilityHolds(t, o, LocalDay(start, z.loc), now, nanos)
	})
}

// checkPlacement checks an accepted hold request.
func checkPlacement(t *testing.T, o Offer, p Placement, start, end time.Time, q int, now time.Time) {
	t.Helper()
	require.LessOrEqual(t, q, o.Capacity)
	require.True(t, p.Start.Equal(start) && p.Start.Location() == time.UTC, "start %v placed at %v", start, p.Start)
	require.True(t, p.End.After(p.Start), "an empty window")
	require.True(t, p.End.After(now), "a window that is over")
	require.LessOrEqual(t, p.End.Sub(p.Start), MaxHoldLength)
	own, ok := o.Plan.Window(p.Start, p.End, o.Loc)
	require.True(t, ok, "the customer's window has a gap")
	require.True(t, own[0].Start.Equal(p.Start), "the start is off the grid")
	require.True(t, own[0].End.After(now), "the first slot is over")
	if o.Service != nil {
		require.True(t, end.IsZero() || end.Equal(p.End))
		require.True(t, p.End.Equal(p.Start.Add(o.Service.Duration)))
		require.True(t, p.OccupyStart.Equal(p.Start.Add(-o.Service.Prep)) && p.OccupyEnd.Equal(p.End.Add(o.Service.Cleanup)))
		require.Equal(t, o.Service.PriceCents*int64(q), p.AmountCents)
	} else {
		require.True(t, end.Equal(p.End) && own[len(own)-1].End.Equal(p.End), "the end is off the grid")
		require.True(t, p.OccupyStart.Equal(p.Start) && p.OccupyEnd.Equal(p.End))
		require.Equal(t, o.PriceCents*int64(len(own))*int64(q), p.AmountCents)
	}
	require.GreaterOrEqual(t, p.AmountCents, int64(0))
	require.NotEmpty(t, p.Slots)
	require.False(t, p.Slots[0].Start.After(p.OccupyStart), "the slots start after the physical window")
	require.False(t, p.Slots[len(p.Slots)-1].End.Before(p.OccupyEnd), "the slots end before the physical window")
	for i, s := range p.Slots {
		require.True(t, s.Start.Before(p.OccupyEnd) && s.End.After(p.OccupyStart), "slot %d is outside the physical window", i)
		if i > 0 {
			require.True(t, s.Start.Equal(p.Slots[i-1].End), "the slots have a gap at %d", i)
		}
	}
	last := LocalDay(own[len(own)-1].Start, o.Loc)
	require.True(t, o.Plan.WithinHorizon(last, now, o.Loc) && !o.Policy.TooFar(last, now, o.Loc), "beyond the horizon")
	require.False(t, o.Policy.TooSoon(p.Start, now), "inside the minimum notice")
	again, err := o.Place(start, end, q, now)
	require.NoError(t, err)
	require.Equal(t, p, again, "placing the same request twice")
}

// checkAvailabilityHolds checks that a start availability shows as open on day can be held. The
// inventory is open as the engine generates it: the schedule's days from today on, empty.
func checkAvailabilityHolds(t *testing.T, o Offer, day, now time.Time, pick uint32) {
	t.Helper()
	cands := o.Candidates(day)
	if len(cands) == 0 {
		return
	}
	today := LocalDay(now, o.Loc)
	state := func(s Slot) SlotState {
		d, err := time.ParseInLocation(DayLayout, s.Day, o.Loc)
		require.NoError(t, err)
		generated := !d.Before(today) && o.Plan.WithinHorizon(d, now, o.Loc)
		return SlotState{Open: generated, Capacity: o.Capacity}
	}
	for _, i := range []int{0, int(pick) % len(cands), len(cands) - 1} {
		c := cands[i]
		reason, remaining := o.Judge(c, state, now)
		if reason != "" {
			require.Zero(t, remaining)
			continue
		}
		require.Equal(t, o.Capacity, remaining, "an empty inventory has every unit free")
		end := c.End
		if o.Service != nil {
			end = time.Time{}
		}
		p, err := o.Place(c.Start, end, 1, now)
		require.NoError(t, err, "availability offers %v–%v at %v, but it cannot be held", c.Start, c.End, now)
		require.Equal(t, c.Occupy, p.Slots, "a hold takes other slots than availability showed")
	}
	require.True(t, slices.IsSortedFunc(cands, func(a, b Candidate) int { return a.Start.Compare(b.Start) }), "candidates out of order")
}
