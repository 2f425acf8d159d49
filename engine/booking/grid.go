package booking

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DayLayout is the venue-local date format of the API and of resource-days.
const DayLayout = "2006-01-02"

// ClockTime is a venue-local wall time in minutes after midnight; 24:00 is 1440.
type ClockTime int

// ParseClock reads "HH:MM" (00:00 to 24:00).
func ParseClock(s string) (ClockTime, error) {
	h, m, ok := strings.Cut(s, ":")
	// Digits only: Atoi alone would take "+1:00" and "-0:00", which are not HH:MM.
	if !ok || len(h) != 2 || len(m) != 2 || strings.Trim(h+m, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not HH:MM", s)
	}
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if err1 != nil || err2 != nil || hh < 0 || mm < 0 || mm > 59 || hh > 24 || (hh == 24 && mm != 0) {
		return 0, fmt.Errorf("%q is not a time of day", s)
	}
	return ClockTime(hh*60 + mm), nil
}

// MinuteOfDay is the venue-local wall time of t.
func MinuteOfDay(t time.Time) ClockTime { return ClockTime(t.Hour()*60 + t.Minute()) }

// WeeklyRule opens a resource on some ISO weekdays (1 = Monday … 7 = Sunday) between venue-local
// times Open and Close ("HH:MM"; Close may be "24:00").
type WeeklyRule struct {
	Weekdays []int  `json:"weekdays"`
	Open     string `json:"open"`
	Close    string `json:"close"`
}

// ScheduleException overrides the weekly rules on one venue-local date: closed all day, or open
// between Open and Close only.
type ScheduleException struct {
	Date   string `json:"date"`
	Closed bool   `json:"closed,omitempty"`
	Open   string `json:"open,omitempty"`
	Close  string `json:"close,omitempty"`
}

// ScheduleInput is a resource's opening rules; inventory is generated for HorizonDays ahead.
type ScheduleInput struct {
	SlotMinutes int
	Weekly      []WeeklyRule
	Exceptions  []ScheduleException
	HorizonDays int
}

// interval is one opening of a day, in wall minutes.
type interval struct{ open, close ClockTime }

// Plan is a parsed schedule: what the grid of any venue-local date is. A plan never changes once
// built; a new schedule builds a new plan.
type Plan struct {
	slotMinutes int
	weekly      map[int][]interval // ISO weekday → openings
	exceptions  map[string][]interval
	horizonDays int

	// days memoises DaySlots: the hold path asks for the same few days again and again.
	days sync.Map // dayMemo → []Slot
}

// SlotMinutes is the grid's slot length.
func (p *Plan) SlotMinutes() int { return p.slotMinutes }

// HorizonDays is how many venue-local days ahead (today included) can be booked.
func (p *Plan) HorizonDays() int { return p.horizonDays }

// ValidateWeekdays checks a list of ISO weekdays.
func ValidateWeekdays(field string, days []int) error {
	if len(days) == 0 {
		return Invalid("invalid_weekdays", "at least one ISO weekday (1 = Monday … 7 = Sunday) is needed").WithField(field)
	}
	for _, d := range days {
		if d < 1 || d > 7 {
			return Invalid("invalid_weekdays", "%d is not an ISO weekday (1 = Monday … 7 = Sunday)", d).WithField(field)
		}
	}
	return nil
}

func parseInterval(field, open, close string) (interval, error) {
	o, err := ParseClock(open)
	if err != nil {
		return interval{}, Invalid("invalid_time_of_day", "%v", err).WithField(field + ".open")
	}
	c, err := ParseClock(close)
	if err != nil {
		return interval{}, Invalid("invalid_time_of_day", "%v", err).WithField(field + ".close")
	}
	if c <= o {
		return interval{}, Invalid("invalid_opening", "close %s is not after open %s", close, open).WithField(field)
	}
	return interval{o, c}, nil
}

// BuildPlan validates a schedule and parses it.
func BuildPlan(in ScheduleInput) (*Plan, error) {
	if err := CheckRange(FieldSlotMinutes, int64(in.SlotMinutes)); err != nil {
		return nil, err
	}
	if err := CheckRange(FieldHorizonDays, int64(in.HorizonDays)); err != nil {
		return nil, err
	}
	p := &Plan{slotMinutes: in.SlotMinutes, weekly: map[int][]interval{}, exceptions: map[string][]interval{}, horizonDays: in.HorizonDays}
	for i, r := range in.Weekly {
		field := fmt.Sprintf("weekly[%d]", i)
		if err := ValidateWeekdays(field+".weekdays", r.Weekdays); err != nil {
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
		if _, err := time.Parse(DayLayout, x.Date); err != nil {
			return nil, Invalid("invalid_date", "%q is not YYYY-MM-DD", x.Date).WithField(field + ".date")
		}
		if _, dup := p.exceptions[x.Date]; dup {
			return nil, Invalid("duplicate_exception", "%s has another exception", x.Date).WithField(field)
		}
		if x.Closed {
			if x.Open != "" || x.Close != "" {
				return nil, Invalid("invalid_exception", "a closed day has no open or close").WithField(field)
			}
			p.exceptions[x.Date] = nil
			continue
		}
		if x.Open == "" || x.Close == "" {
			return nil, Invalid("invalid_exception", "an exception is closed, or has open and close").WithField(field)
		}
		iv, err := parseInterval(field, x.Open, x.Close)
		if err != nil {
			return nil, err
		}
		p.exceptions[x.Date] = []interval{iv}
	}
	for d, ivs := range p.weekly {
		if err := checkOverlap(ivs); err != nil {
			return nil, Invalid("overlapping_openings", "weekday %d: %v (a weekday listed twice, or two rules that overlap)", d, err).WithField("weekly")
		}
	}
	// A schedule's inventory is written in the request that sets it: one too large to write in a
	// request's time would time out as if storage were down, however often it is retried.
	if n := p.slotsWithin(in.HorizonDays); n > MaxInventorySlots {
		return nil, Invalid("invalid_horizon_days", "%d days of this grid are %d slots, over %d: shorten horizon_days or lengthen slot_minutes",
			in.HorizonDays, n, MaxInventorySlots).WithField(string(FieldHorizonDays))
	}
	return p, nil
}

// MaxInventorySlots bounds the slots a schedule generates over its horizon: 5-minute slots around the
// clock for the longest horizon.
const MaxInventorySlots = 366 * 24 * 60 / 5

// slotsWithin is the most slots days consecutive days can have, whatever weekday they start on,
// counting every exception's slots on top (a bound: DST days are taken as 24 hours).
func (p *Plan) slotsWithin(days int) int {
	perDay := func(ivs []interval) (n int) {
		for _, iv := range ivs {
			n += (int(iv.close) - int(iv.open)) / p.slotMinutes
		}
		return n
	}
	most := 0
	for first := 0; first < 7; first++ {
		n := 0
		for i := 0; i < days; i++ {
			n += perDay(p.weekly[(first+i)%7+1])
		}
		most = max(most, n)
	}
	for _, ivs := range p.exceptions {
		most += perDay(ivs)
	}
	return most
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

// Slot is one grid slot of a resource, as instants, with the venue-local date it belongs to.
type Slot struct {
	Start, End time.Time
	Day        string
}

// DaySlots lays out the grid of one venue-local date in wall time, so DST days get the right slots:
// a slot whose wall start does not exist that day (spring forward) is skipped.
func (p *Plan) DaySlots(day time.Time, loc *time.Location) []Slot {
	y, m, d := day.Date()
	memo := dayMemo{y: y, m: m, d: d, zone: loc.String()}
	if v, ok := p.days.Load(memo); ok {
		return v.([]Slot)
	}
	out := p.layDay(day, day.Format(DayLayout), loc)
	p.days.Store(memo, out)
	return out
}

// dayMemo is a key of Plan.days: a date in a zone, named (not formatted) so that a hit costs nothing.
type dayMemo struct {
	y, d int
	m    time.Month
	zone string
}

// WeeklySlots are the slots the weekly schedule gives a venue-local date that an exception changes
// (nil on a date without one): availability shows the starts the exception takes away as closed,
// so that a client can tell a day the venue shuts from one it never opens.
func (p *Plan) WeeklySlots(day time.Time, loc *time.Location) []Slot {
	name := day.Format(DayLayout)
	if _, ok := p.exceptions[name]; !ok {
		return nil
	}
	return p.laySlots(day, name, p.weekly[IsoWeekday(day)], loc)
}

func (p *Plan) layDay(day time.Time, name string, loc *time.Location) []Slot {
	ivs, ok := p.exceptions[name]
	if !ok {
		ivs = p.weekly[IsoWeekday(day)]
	}
	return p.laySlots(day, name, ivs, loc)
}

// laySlots lays out the openings ivs of one venue-local date.
func (p *Plan) laySlots(day time.Time, name string, ivs []interval, loc *time.Location) []Slot {
	y, m, d := day.Date()
	step := time.Duration(p.slotMinutes) * time.Minute
	var out []Slot
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
				out = append(out, Slot{Start: start.UTC(), End: next.UTC(), Day: name})
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
		// time.Date may answer either occurrence of a repeated wall time (east of UTC, the later
		// one): step back to the first when the clocks had already read it before the last change.
		if start, _ := t.ZoneBounds(); !start.IsZero() {
			_, before := start.Add(-time.Nanosecond).Zone()
			_, after := t.Zone()
			if earlier := t.Add(-time.Duration(before-after) * time.Second); before > after && earlier.Before(start) {
				return earlier
			}
		}
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

// IsoWeekday is t's ISO weekday, 1 = Monday … 7 = Sunday.
func IsoWeekday(t time.Time) int {
	wd := int(t.Weekday())
	if wd == 0 {
		return 7
	}
	return wd
}

// LocalDay is the venue-local midnight of the date containing t.
func LocalDay(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, loc)
}

// nextDay is the venue-local day after day. AddDate alone may not move: a date the zone skipped
// (Pacific/Apia went from 2011-12-29 to 2011-12-31) normalises back onto day itself.
func nextDay(day time.Time) time.Time {
	y, m, d := day.Date()
	next := day.AddDate(0, 0, 1)
	for n := 2; ; n++ {
		if ny, nm, nd := next.Date(); ny != y || nm != m || nd != d {
			return next
		}
		next = day.AddDate(0, 0, n)
	}
}

// Window returns the grid slots that overlap [from, to), in order. ok is false when the grid does not
// cover the whole window without a gap (closed for part of it).
func (p *Plan) Window(from, to time.Time, loc *time.Location) (slots []Slot, ok bool) {
	first := LocalDay(from, loc).AddDate(0, 0, -1)
	last := LocalDay(to, loc)
	for day := first; !day.After(last); day = nextDay(day) {
		for _, s := range p.DaySlots(day, loc) {
			if s.Start.Before(to) && s.End.After(from) {
				slots = append(slots, s)
			}
		}
	}
	if len(slots) == 0 || slots[0].Start.After(from) || slots[len(slots)-1].End.Before(to) {
		return slots, false
	}
	for i := 1; i < len(slots); i++ {
		if !slots[i].Start.Equal(slots[i-1].End) {
			return slots, false
		}
	}
	return slots, true
}

// WithinHorizon reports whether a venue-local day can be sold now: the plan sells HorizonDays days,
// today included.
func (p *Plan) WithinHorizon(day, now time.Time, loc *time.Location) bool {
	return day.Before(LocalDay(now, loc).AddDate(0, 0, p.horizonDays))
}
