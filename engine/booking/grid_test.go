package booking

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func everyDay(open, close string) []WeeklyRule {
	return []WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: open, Close: close}}
}

func mustPlan(t *testing.T, in ScheduleInput) *Plan {
	t.Helper()
	p, err := BuildPlan(in)
	require.NoError(t, err)
	return p
}

func TestDSTDaysHaveTheRightSlots(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	p := mustPlan(t, ScheduleInput{SlotMinutes: 60, HorizonDays: 7, Weekly: everyDay("00:00", "24:00")})
	cases := []struct {
		day   string
		slots int
		check string // a wall start that must be offered, with its offset
	}{
		{"2027-03-14", 23, "2027-03-14T01:00:00-05:00"}, // 02:00 does not exist
		{"2027-11-07", 25, "2027-11-07T01:00:00-05:00"}, // 01:00 happens twice
		{"2027-06-01", 24, "2027-06-01T01:00:00-04:00"},
	}
	for _, c := range cases {
		day, _ := time.ParseInLocation(DayLayout, c.day, ny)
		slots := p.DaySlots(day, ny)
		require.Len(t, slots, c.slots, c.day)
		want, _ := time.Parse(time.RFC3339, c.check)
		found := false
		for i, s := range slots {
			require.Equal(t, time.Hour, s.End.Sub(s.Start), "%s slot %d lasts an hour", c.day, i)
			if i > 0 {
				require.True(t, s.Start.Equal(slots[i-1].End), "%s slots are contiguous", c.day)
			}
			found = found || s.Start.Equal(want)
		}
		require.True(t, found, "%s offers %s", c.day, c.check)
	}
}

func TestBuildPlanRefusesBadSchedules(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in    ScheduleInput
		code  string
		field string
	}{
		{ScheduleInput{SlotMinutes: 0, HorizonDays: 7}, "invalid_slot_minutes", "slot_minutes"},
		{ScheduleInput{SlotMinutes: 60, HorizonDays: 367}, "invalid_horizon_days", "horizon_days"},
		{ScheduleInput{SlotMinutes: 60, HorizonDays: 7, Weekly: []WeeklyRule{{Weekdays: []int{0}, Open: "08:00", Close: "09:00"}}}, "invalid_weekdays", "weekly[0].weekdays"},
		{ScheduleInput{SlotMinutes: 60, HorizonDays: 7, Weekly: []WeeklyRule{{Weekdays: []int{1}, Open: "8:00", Close: "09:00"}}}, "invalid_time_of_day", "weekly[0].open"},
		{ScheduleInput{SlotMinutes: 60, HorizonDays: 7, Weekly: []WeeklyRule{{Weekdays: []int{1}, Open: "09:00", Close: "09:00"}}}, "invalid_opening", "weekly[0]"},
		{ScheduleInput{SlotMinutes: 60, HorizonDays: 7, Weekly: []WeeklyRule{{Weekdays: []int{1}, Open: "08:00", Close: "12:00"}, {Weekdays: []int{1}, Open: "11:00", Close: "13:00"}}}, "overlapping_openings", "weekly"},
		{ScheduleInput{SlotMinutes: 60, HorizonDays: 7, Exceptions: []ScheduleException{{Date: "2026-13-01", Closed: true}}}, "invalid_date", "exceptions[0].date"},
		{ScheduleInput{SlotMinutes: 60, HorizonDays: 7, Exceptions: []ScheduleException{{Date: "2026-12-01", Closed: true, Open: "08:00"}}}, "invalid_exception", "exceptions[0]"},
		{ScheduleInput{SlotMinutes: 60, HorizonDays: 7, Exceptions: []ScheduleException{{Date: "2026-12-01", Open: "08:00"}}}, "invalid_exception", "exceptions[0]"},
		{ScheduleInput{SlotMinutes: 60, HorizonDays: 7, Exceptions: []ScheduleException{{Date: "2026-12-01", Closed: true}, {Date: "2026-12-01", Closed: true}}}, "duplicate_exception", "exceptions[1]"},
	} {
		_, err := BuildPlan(c.in)
		e, ok := AsError(err)
		require.True(t, ok, "%+v: %v", c.in, err)
		require.Equal(t, c.code, e.Code, "%+v", c.in)
		require.Equal(t, c.field, e.Field, "%+v", c.in)
	}
}

func TestPlaceAHold(t *testing.T) {
	t.Parallel()
	p := mustPlan(t, ScheduleInput{SlotMinutes: 90, HorizonDays: 7, Weekly: everyDay("08:30", "22:00"),
		Exceptions: []ScheduleException{{Date: "2026-12-08", Closed: true}}})
	o := Offer{ResourceID: 3, Capacity: 2, PriceCents: 1000, Active: true, Plan: p, Loc: shanghai}
	now := t0 // Monday 10:00
	at := func(hhmm string, days int) time.Time {
		c, err := ParseClock(hhmm)
		require.NoError(t, err)
		return time.Date(2026, 12, 7+days, 0, int(c), 0, 0, shanghai)
	}
	cases := []struct {
		name       string
		o          Offer
		start, end time.Time
		qty        int
		want       error
	}{
		{"off grid start", o, at("09:00", 0), at("10:30", 0), 1, ErrOffGrid},
		{"off grid end", o, at("11:30", 0), at("12:30", 0), 1, ErrOffGrid},
		{"yesterday", o, at("08:30", -1), at("10:00", -1), 1, ErrSlotPast},
		{"a slot that ended today", o, at("08:30", 0), at("10:00", 0), 1, ErrSlotPast},
		{"after closing", o, at("22:00", 0), at("23:30", 0), 1, ErrSlotClosed},
		{"a closed day", o, at("11:30", 1), at("13:00", 1), 1, ErrSlotClosed},
		{"beyond the horizon", o, at("08:30", 7), at("10:00", 7), 1, ErrTooFar},
		{"more than the capacity", o, at("11:30", 0), at("13:00", 0), 3, Invalid("invalid_quantity", "")},
		{"end before start", o, at("13:00", 0), at("11:30", 0), 1, Invalid("invalid_window", "")},
		{"no end", o, at("13:00", 0), time.Time{}, 1, Invalid("missing_end", "")},
		{"inactive", Offer{Plan: p, Loc: shanghai, Capacity: 2}, at("11:30", 0), at("13:00", 0), 1, ErrResourceInactive},
		{"no schedule", Offer{Active: true, Loc: shanghai, Capacity: 2}, at("11:30", 0), at("13:00", 0), 1, ErrSlotClosed},
	}
	for _, c := range cases {
		_, err := c.o.Place(c.start, c.end, c.qty, now)
		require.ErrorIs(t, err, c.want, c.name)
	}
	got, err := o.Place(at("10:00", 0), at("11:30", 0), 1, now)
	require.NoError(t, err, "a slot in progress can still be held")
	require.Len(t, got.Slots, 1)
	got, err = o.Place(at("11:30", 0), at("14:30", 0), 2, now)
	require.NoError(t, err)
	require.Len(t, got.Slots, 2)
	require.EqualValues(t, 2*2*1000, got.AmountCents, "price per slot × slots × quantity")

	svc := o
	svc.Service = &ServiceTerms{ID: 9, Duration: 50 * time.Minute, Prep: 15 * time.Minute, Cleanup: 15 * time.Minute, PriceCents: 30000}
	svc.Plan = mustPlan(t, ScheduleInput{SlotMinutes: 5, HorizonDays: 7, Weekly: everyDay("08:00", "20:00")})
	got, err = svc.Place(at("14:00", 0), time.Time{}, 1, now)
	require.NoError(t, err)
	require.Equal(t, at("13:45", 0), got.OccupyStart.In(shanghai))
	require.Equal(t, at("15:05", 0), got.OccupyEnd.In(shanghai))
	require.Len(t, got.Slots, 16, "13:45–15:05 in 5-minute slots")
	require.EqualValues(t, 30000, got.AmountCents)
	_, err = svc.Place(at("14:00", 0), at("15:00", 0), 1, now)
	require.ErrorIs(t, err, Invalid("invalid_end", ""), "a service's end follows from its duration")
	_, err = svc.Place(at("08:00", 1), time.Time{}, 1, now)
	require.ErrorIs(t, err, ErrSlotClosed, "the preparation buffer falls before opening")
}

func TestJudgeTellsFullFromBufferConflict(t *testing.T) {
	t.Parallel()
	p := mustPlan(t, ScheduleInput{SlotMinutes: 5, HorizonDays: 7, Weekly: everyDay("08:00", "20:00")})
	o := Offer{ResourceID: 3, Capacity: 1, Active: true, Plan: p, Loc: shanghai,
		Service: &ServiceTerms{Duration: 50 * time.Minute, Prep: 15 * time.Minute, Cleanup: 15 * time.Minute}}
	day := LocalDay(t0, shanghai).AddDate(0, 0, 1)
	cands := o.Candidates(day)
	require.NotEmpty(t, cands)
	require.True(t, cands[0].Occupy == nil, "08:00 has no room for its 15-minute preparation")
	taken := time.Date(2026, 12, 8, 14, 0, 0, 0, shanghai) // one 5-minute slot taken at 14:00
	state := func(s Slot) SlotState {
		used := 0
		if s.Start.Equal(taken) {
			used = 1
		}
		return SlotState{Open: true, Capacity: 1, Used: used}
	}
	reasons := map[string]string{}
	for _, c := range cands {
		r, _ := o.Judge(c, state, t0)
		reasons[c.Start.In(shanghai).Format("15:04")] = r
	}
	require.Equal(t, ReasonClosed, reasons["08:00"])
	require.Equal(t, ReasonFull, reasons["13:15"], "14:00 is inside 13:15–14:05")
	require.Equal(t, ReasonBufferConflict, reasons["14:05"], "14:00 is in its preparation buffer")
	require.Equal(t, ReasonBufferConflict, reasons["13:00"], "14:00 is in its clean-up buffer")
	require.Equal(t, "", reasons["14:20"], "its preparation starts at 14:05")
	r, rem := o.Judge(cands[len(cands)-1], state, t0.AddDate(0, 0, 3))
	require.Equal(t, ReasonPast, r)
	require.Zero(t, rem)
}

// A service's duration must be a whole number of its resource's slots: its hold starts on the grid
// and would otherwise end inside a slot.
func TestCheckServiceDuration(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		duration, slot int
		ok             bool
	}{{60, 60, true}, {120, 60, true}, {50, 10, true}, {50, 5, true}, {50, 60, false}, {45, 30, false}, {90, 60, false}, {50, 0, true}} {
		err := CheckServiceDuration(c.duration, c.slot)
		if c.ok {
			require.NoError(t, err, "%d on %d", c.duration, c.slot)
			continue
		}
		require.ErrorIs(t, err, Invalid("invalid_duration", ""), "%d on %d", c.duration, c.slot)
		e, _ := AsError(err)
		require.Equal(t, string(FieldDurationMinutes), e.Field)
		require.Equal(t, c.slot, e.Details["slot_minutes"])
	}
}

// A day an exception closes, or shortens, shows the weekly grid's slots it takes away as closed, in
// order with the ones it keeps; a day without an exception shows no closed slot.
func TestExceptionSlotsShowAsClosed(t *testing.T) {
	t.Parallel()
	p := mustPlan(t, ScheduleInput{SlotMinutes: 60, HorizonDays: 7, Weekly: everyDay("08:00", "12:00"),
		Exceptions: []ScheduleException{{Date: "2026-12-08", Closed: true}, {Date: "2026-12-09", Open: "09:00", Close: "11:00"},
			{Date: "2026-12-10", Open: "08:30", Close: "10:30"}}})
	res := Offer{ResourceID: 3, Capacity: 1, Active: true, Plan: p, Loc: shanghai}
	svc := res
	svc.Service = &ServiceTerms{Duration: 2 * time.Hour}
	empty := func(Slot) SlotState { return SlotState{Open: true, Capacity: 1} }
	judged := func(o Offer, date int) (starts, reasons []string) {
		for _, c := range o.Candidates(time.Date(2026, 12, date, 0, 0, 0, 0, shanghai)) {
			r, _ := o.Judge(c, empty, t0)
			starts, reasons = append(starts, c.Start.In(shanghai).Format("15:04")), append(reasons, r)
		}
		return starts, reasons
	}
	starts, reasons := judged(res, 8)
	require.Equal(t, []string{"08:00", "09:00", "10:00", "11:00"}, starts, "a closed day lists its weekly slots")
	require.Equal(t, []string{ReasonClosed, ReasonClosed, ReasonClosed, ReasonClosed}, reasons)
	starts, reasons = judged(res, 9)
	require.Equal(t, []string{"08:00", "09:00", "10:00", "11:00"}, starts, "a shortened day lists its weekly slots in order")
	require.Equal(t, []string{ReasonClosed, "", "", ReasonClosed}, reasons)
	starts, reasons = judged(res, 10)
	require.Equal(t, []string{"08:30", "09:30", "11:00"}, starts, "openings off the weekly grid: a weekly slot they overlap is not listed")
	require.Equal(t, []string{"", "", ReasonClosed}, reasons)
	_, reasons = judged(res, 11)
	require.Equal(t, []string{"", "", "", ""}, reasons, "a day without an exception")
	starts, reasons = judged(svc, 9)
	require.Equal(t, []string{"08:00", "09:00", "10:00"}, starts, "a service: the weekly starts it fits, open where the day has them")
	require.Equal(t, []string{ReasonClosed, "", ReasonClosed}, reasons)
}
