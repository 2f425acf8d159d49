package booking

import (
	"fmt"
	"time"
)

// PeakRule overrides the grace on some weekdays between venue-local From and To ("HH:MM"), judged
// by the booking's start.
type PeakRule struct {
	Weekdays     []int  `json:"weekdays"`
	From         string `json:"from"`
	To           string `json:"to"`
	GraceSeconds int    `json:"grace_seconds"`
}

// GraceInput is a category's grace as an admin writes it.
type GraceInput struct {
	Category     string
	GraceSeconds int
	Peak         []PeakRule
}

// Grace is a category's parsed grace: how long after start a no-show keeps its slot.
type Grace struct {
	base  time.Duration
	peaks []peak
}

type peak struct {
	days     [8]bool // indexed by ISO weekday
	from, to ClockTime
	grace    time.Duration
}

// ParseGrace validates a category's grace and its peak windows.
func ParseGrace(in GraceInput) (Grace, error) {
	if err := CheckOptionalText("category", in.Category, MaxTagLen); err != nil {
		return Grace{}, err
	}
	if err := CheckRange(FieldGraceSeconds, int64(in.GraceSeconds)); err != nil {
		return Grace{}, err
	}
	g := Grace{base: time.Duration(in.GraceSeconds) * time.Second}
	for i, p := range in.Peak {
		field := fmt.Sprintf("peak[%d]", i)
		if err := ValidateWeekdays(field+".weekdays", p.Weekdays); err != nil {
			return Grace{}, err
		}
		from, err := ParseClock(p.From)
		if err != nil {
			return Grace{}, Invalid("invalid_time_of_day", "%v", err).WithField(field + ".from")
		}
		to, err := ParseClock(p.To)
		if err != nil {
			return Grace{}, Invalid("invalid_time_of_day", "%v", err).WithField(field + ".to")
		}
		if to <= from {
			return Grace{}, Invalid("invalid_opening", "to %s is not after from %s", p.To, p.From).WithField(field)
		}
		if err := CheckRange(FieldGraceSeconds, int64(p.GraceSeconds)); err != nil {
			e, _ := AsError(err)
			return Grace{}, e.WithField(field + ".grace_seconds")
		}
		w := peak{from: from, to: to, grace: time.Duration(p.GraceSeconds) * time.Second}
		for _, d := range p.Weekdays {
			w.days[d] = true
		}
		g.peaks = append(g.peaks, w)
	}
	return g, nil
}

// For is the grace of a booking starting at start (shown in the venue's zone loc): the first peak
// window containing the venue-local start, else the category's own grace.
func (g Grace) For(start time.Time, loc *time.Location) time.Duration {
	local := start.In(loc)
	minute := MinuteOfDay(local)
	for _, w := range g.peaks {
		if w.days[IsoWeekday(local)] && minute >= w.from && minute < w.to {
			return w.grace
		}
	}
	return g.base
}

// GraceFor resolves the grace of a booking of a resource in category: the category's policy when
// there is one, else the deployment's default.
func GraceFor(policies map[string]Grace, category string, def time.Duration, start time.Time, loc *time.Location) time.Duration {
	g, ok := policies[category]
	if !ok {
		return def
	}
	return g.For(start, loc)
}
