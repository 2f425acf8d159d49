package booking

import (
	"slices"
	"time"
)

// Reasons a slot is not available (docs/API.md availability).
const (
	ReasonFull           = "full"
	ReasonClosed         = "closed"
	ReasonPast           = "past"
	ReasonBufferConflict = "buffer_conflict"
	ReasonTooSoon        = "too_soon"
	ReasonTooFar         = "too_far"
)

// Candidate is one start offered to the customer on a day, with the slots it would occupy.
type Candidate struct {
	Start, End time.Time
	// Occupy is the physical window's slots; nil when the physical window is not fully open.
	Occupy []Slot
	first  int // index in Occupy of the customer's first slot
	own    int // how many of Occupy's slots are the customer's own (the rest are buffers)
}

// Candidates lists every start of a venue-local day in order: each grid slot for a resource, or each
// grid slot at which the service fits before closing; and, on a date an exception changes, each
// start the weekly schedule would offer that the exception takes away, without slots to occupy
// (Judge: closed).
func (o Offer) Candidates(day time.Time) []Candidate {
	if o.Plan == nil {
		return nil
	}
	var out []Candidate
	daySlots := o.Plan.DaySlots(day, o.Loc)
	for _, s := range daySlots {
		c := Candidate{Start: s.Start, End: s.End}
		if o.Service == nil {
			c.Occupy, c.own = []Slot{s}, 1
			out = append(out, c)
			continue
		}
		c.End = s.Start.Add(o.Service.Duration)
		own, ok := o.Plan.Window(c.Start, c.End, o.Loc)
		if !ok {
			continue // the service does not fit before closing
		}
		from, to := PhysicalWindow(c.Start, c.End, o.Service.Prep, o.Service.Cleanup)
		if occ, ok := o.Plan.Window(from, to, o.Loc); ok {
			c.Occupy, c.own = occ, len(own)
			for i, x := range occ {
				if x.Start.Equal(own[0].Start) {
					c.first = i
				}
			}
		}
		out = append(out, c)
	}
	out = append(out, o.closedStarts(day, daySlots, out)...)
	slices.SortStableFunc(out, func(a, b Candidate) int { return a.Start.Compare(b.Start) })
	return out
}

// closedStarts are the starts the weekly schedule offers on day that its exception takes away: for
// a resource, each weekly slot no slot of the day overlaps; for a service, each weekly start at which
// it fits the weekly hours and that is not a start of the day (open).
func (o Offer) closedStarts(day time.Time, daySlots []Slot, open []Candidate) []Candidate {
	weekly := o.Plan.WeeklySlots(day, o.Loc)
	var out []Candidate
	for i, w := range weekly {
		if o.Service == nil {
			if !slices.ContainsFunc(daySlots, func(s Slot) bool { return s.Start.Before(w.End) && w.Start.Before(s.End) }) {
				out = append(out, Candidate{Start: w.Start, End: w.End})
			}
			continue
		}
		end := w.Start.Add(o.Service.Duration)
		if slices.ContainsFunc(open, func(c Candidate) bool { return c.Start.Equal(w.Start) }) || !covers(weekly[i:], end) {
			continue
		}
		out = append(out, Candidate{Start: w.Start, End: end})
	}
	return out
}

// covers reports whether slots, from the first, run without a gap until end.
func covers(slots []Slot, end time.Time) bool {
	for i, s := range slots {
		if i > 0 && !s.Start.Equal(slots[i-1].End) {
			return false
		}
		if !s.End.Before(end) {
			return true
		}
	}
	return false
}

// SlotState is what the inventory says of one slot.
type SlotState struct {
	Open     bool // the slot has capacity generated (it is on sale)
	Capacity int
	Used     int
}

// Judge says why a candidate is not available at now ("" when it is) and how many units remain.
// A unit taken in the customer's own window makes it "full"; one taken only in a buffer makes it
// "buffer_conflict", so that a client can tell a taken slot from a neighbour's clean-up.
func (o Offer) Judge(c Candidate, state func(Slot) SlotState, now time.Time) (reason string, remaining int) {
	// The days ahead are counted to the last day the customer's own window reaches, as Place counts
	// them: a service that runs past midnight into a day not yet on sale cannot be held.
	last := LocalDay(c.Start, o.Loc)
	if c.Occupy != nil {
		last = LocalDay(c.Occupy[c.first+c.own-1].Start, o.Loc)
	}
	switch {
	// Past as Place has it: over, or its first slot over (a service that began a slot or more ago).
	case !c.End.After(now), c.Occupy != nil && !c.Occupy[c.first].End.After(now):
		return ReasonPast, 0
	case o.Plan == nil || !o.Plan.WithinHorizon(last, now, o.Loc), o.Policy.TooFar(last, now, o.Loc):
		return ReasonTooFar, 0
	case !o.Active || c.Occupy == nil:
		return ReasonClosed, 0
	case o.Policy.TooSoon(c.Start, now):
		return ReasonTooSoon, 0
	}
	remaining = -1
	ownFull, bufferFull := false, false
	for i, s := range c.Occupy {
		st := state(s)
		if !st.Open {
			return ReasonClosed, 0
		}
		free := st.Capacity - st.Used
		if free <= 0 {
			if i >= c.first && i < c.first+c.own {
				ownFull = true
			} else {
				bufferFull = true
			}
		}
		if remaining < 0 || free < remaining {
			remaining = free
		}
	}
	switch {
	case ownFull:
		return ReasonFull, 0
	case bufferFull:
		return ReasonBufferConflict, 0
	}
	return "", max(remaining, 0)
}
