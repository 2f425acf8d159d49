package engine

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// dayLayout is the venue-local date format of the API and of resource-days.
const dayLayout = "2006-01-02"

// clockTime is a venue-local wall time in minutes after midnight; 24:00 is 1440.
type clockTime int

func parseClock(s string) (clockTime, error) {
	h, m, ok := strings.Cut(s, ":")
	if !ok || len(h) != 2 || len(m) != 2 {
		return 0, fmt.Errorf("%q is not HH:MM", s)
	}
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if err1 != nil || err2 != nil || hh < 0 || mm < 0 || mm > 59 || hh > 24 || (hh == 24 && mm != 0) {
		return 0, fmt.Errorf("%q is not a time of day", s)
	}
	return clockTime(hh*60 + mm), nil
}

// interval is one opening of a day, in wall minutes.
type interval struct{ open, close clockTime }

// plan is a parsed schedule: what the grid of any venue-local date is.
type plan struct {
	slotMinutes int
	weekly      map[int][]interval // ISO weekday → openings
	exceptions  map[string][]interval
	horizonDays int

	// days memoises daySlots: a plan never changes once built (a new schedule builds a new plan),
	// and the hold path asks for the same few days again and again.
	days sync.Map // "2006-01-02 tz" → []slot
}

func validateWeekdays(field string, days []int) error {
	if len(days) == 0 {
		return Invalid("invalid_weekdays", "%s must list at least one ISO weekday (1 = Monday … 7 = Sunday)", field)
	}
	for _, d := range days {
		if d < 1 || d > 7 {
			return Invalid("invalid_weekdays", "%s: %d is not an ISO weekday (1 = Monday … 7 = Sunday)", field, d)
		}
	}
	return nil
}

func parseInterval(field, open, close string) (interval, error) {
	o, err := parseClock(open)
	if err != nil {
		return interval{}, Invalid("invalid_time_of_day", "%s.open: %v", field, err)
	}
	c, err := parseClock(close)
	if err != nil {
		return interval{}, Invalid("invalid_time_of_day", "%s.close: %v", field, err)
	}
	if c <= o {
		return interval{}, Invalid("invalid_opening", "%s: close %s is not after open %s", field, close, open)
	}
	return interval{o, c}, nil
}

// buildPlan validates a schedule and parses it.
func buildPlan(in ScheduleInput) (*plan, error) {
	if in.SlotMinutes < 1 || in.SlotMinutes > 1440 {
		return nil, Invalid("invalid_slot_minutes", "slot_minutes must be between 1 and 1440, not %d", in.SlotMinutes)
	}
	if in.HorizonDays < 1 || in.HorizonDays > 366 {
		return nil, Invalid("invalid_horizon_days", "horizon_days must be between 1 and 366, not %d", in.HorizonDays)
	}
	p := &plan{slotMinutes: in.SlotMinutes, weekly: map[int][]interval{}, exceptions: map[string][]interval{}, horizonDays: in.HorizonDays}
	for i, r := range in.Weekly {
		field := fmt.Sprintf("weekly[%d]", i)
		if err := validateWeekdays(field+".weekdays", r.Weekdays); err != nil {
			return nil, err
		}
		iv, err := parseInterval(field, r.Open, r.Close)
		if err != nil {
			return nil, err
		}
		for _, d := range r.Weekdays {
			p.weekly[d] = append(p.weekly[d], iv)
		}
	}
	for i, x := range in.Exceptions {
		field := fmt.Sprintf("exceptions[%d]", i)
		if _, err := time.Parse(dayLayout, x.Date); err != nil {
			return nil, Invalid("invalid_date", "%s.date: %q is not YYYY-MM-DD", field, x.Date)
		}
		if _, dup := p.exceptions[x.Date]; dup {
			return nil, Invalid("duplicate_exception", "%s: %s has another exception", field, x.Date)
		}
		if x.Closed {
			if x.Open != "" || x.Close != "" {
				return nil, Invalid("invalid_exception", "%s: a closed day has no open or close", field)
			}
			p.exceptions[x.Date] = nil
			continue
		}
		iv, err := parseInterval(field, x.Open, x.Close)
		if err != nil {
			return nil, err
		}
		p.exceptions[x.Date] = []interval{iv}
	}
	for d, ivs := range p.weekly {
		if err := checkOverlap(ivs); err != nil {
			return nil, Invalid("overlapping_openings", "weekday %d: %v (a weekday listed twice, or two rules that overlap)", d, err)
		}
	}
	return p, nil
}

func checkOverlap(ivs []interval) error {
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].open < ivs[j].open })
	for i := 1; i < len(ivs); i++ {
		if ivs[i].open < ivs[i-1].close {
			return fmt.Errorf("openings overlap")
		}
	}
	return nil
}

// slot is one grid slot of a resource, in UTC.
type slot struct {
	start, end time.Time
	day        string // venue-local date
}

// daySlots lays out the grid of one venue-local date in wall time, so DST days get the right slots:
// a slot whose wall start does not exist that day (spring forward) is skipped.
func (p *plan) daySlots(day time.Time, loc *time.Location) []slot {
	name := day.Format(dayLayout)
	memo := name + " " + loc.String()
	if v, ok := p.days.Load(memo); ok {
		return v.([]slot)
	}
	out := p.layDay(day, name, loc)
	p.days.Store(memo, out)
	return out
}

func (p *plan) layDay(day time.Time, name string, loc *time.Location) []slot {
	ivs, ok := p.exceptions[name]
	if !ok {
		ivs = p.weekly[isoWeekday(day)]
	}
	y, m, d := day.Date()
	step := time.Duration(p.slotMinutes) * time.Minute
	var out []slot
	for _, iv := range ivs {
		for t := int(iv.open); t+p.slotMinutes <= int(iv.close); t += p.slotMinutes {
			start := wallInstant(y, m, d, t, loc)
			end := wallInstant(y, m, d, t+p.slotMinutes, loc)
			// Spring forward: a slot inside the skipped hour has no length and is not offered; one
			// that straddles it is shorter. Fall back: the repeated hour makes a wall slot longer,
			// and it is cut into slots of the grid's length so that both hours are sold.
			for start.Before(end) {
				next := start.Add(step)
				if next.After(end) {
					next = end
				}
				out = append(out, slot{start: start.UTC(), end: next.UTC(), day: name})
				start = next
			}
		}
	}
	return out
}

// wallInstant is the instant of a venue-local wall time, minutes after midnight of y-m-d. A wall time
// that does not exist (the hour skipped when clocks spring forward) maps to the moment of the jump,
// and an ambiguous one (the hour repeated when they fall back) to its first occurrence.
func wallInstant(y int, m time.Month, d, minute int, loc *time.Location) time.Time {
	t := time.Date(y, m, d, 0, minute, 0, 0, loc)
	want := time.Date(y, m, d, 0, minute, 0, 0, time.UTC)
	wy, wm, wd := t.Date()
	got := time.Date(wy, wm, wd, t.Hour(), t.Minute(), 0, 0, time.UTC)
	if got.Equal(want) {
		return t
	}
	// In a gap: Go picked an instant on one side of the transition; the jump is the zone boundary
	// nearest to it.
	start, end := t.ZoneBounds()
	if !end.IsZero() && (start.IsZero() || end.Sub(t) <= t.Sub(start)) {
		return end
	}
	return start
}

func isoWeekday(t time.Time) int {
	wd := int(t.Weekday())
	if wd == 0 {
		return 7
	}
	return wd
}

// localDay is the venue-local midnight of the date containing t.
func localDay(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, loc)
}

// window returns the grid slots that overlap [from, to), in order. ok is false when the grid does not
// cover the whole window without a gap (closed for part of it).
func (p *plan) window(from, to time.Time, loc *time.Location) (slots []slot, ok bool) {
	first := localDay(from, loc).AddDate(0, 0, -1)
	last := localDay(to, loc)
	for day := first; !day.After(last); day = day.AddDate(0, 0, 1) {
		for _, s := range p.daySlots(day, loc) {
			if s.start.Before(to) && s.end.After(from) {
				slots = append(slots, s)
			}
		}
	}
	if len(slots) == 0 || slots[0].start.After(from) || slots[len(slots)-1].end.Before(to) {
		return slots, false
	}
	for i := 1; i < len(slots); i++ {
		if !slots[i].start.Equal(slots[i-1].end) {
			return slots, false
		}
	}
	return slots, true
}

func encodeJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs are encoded here
	}
	return string(b)
}
