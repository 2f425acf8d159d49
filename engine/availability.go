package engine

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Availability answers one venue-local day of a resource, or of a service on each of its resources
// (or the one named), from Redis; a cold day is loaded from SQL first.
func (e *Engine) Availability(ctx context.Context, q AvailabilityQuery) ([]SlotAvailability, error) {
	if q.ResourceID == 0 && q.ServiceID == 0 {
		return nil, Invalid("missing_resource_id", "resource_id or service_id is required")
	}
	if q.ServiceID == 0 {
		ri, err := e.resourceForQuery(ctx, q.ResourceID)
		if err != nil {
			return nil, err
		}
		return e.dayOf(ctx, ri, q.Date, nil)
	}
	svc, err := e.service(ctx, q.ServiceID)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, Invalid("unknown_service", "service %d does not exist", q.ServiceID)
		}
		return nil, err
	}
	ids := svc.resources
	if q.ResourceID != 0 {
		if !containsID(ids, q.ResourceID) {
			return nil, Invalid("resource_not_in_service", "resource %d does not deliver service %d", q.ResourceID, q.ServiceID)
		}
		ids = []uint64{q.ResourceID}
	}
	var out []SlotAvailability
	for _, id := range ids {
		ri, err := e.resourceForQuery(ctx, id)
		if err != nil {
			return nil, err
		}
		slots, err := e.dayOf(ctx, ri, q.Date, svc)
		if err != nil {
			return nil, err
		}
		out = append(out, slots...)
	}
	return out, nil
}

func (e *Engine) resourceForQuery(ctx context.Context, id uint64) (*resourceInfo, error) {
	ri, err := e.resource(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, Invalid("unknown_resource", "resource %d does not exist", id)
	}
	return ri, err
}

// candidate is one start offered to the customer with the slots it would occupy.
type candidate struct {
	start, end time.Time
	occupy     []slot // nil: the physical window is not fully open
	custom     int    // how many of occupy's slots are the customer's own (for buffer_conflict)
	first      int    // index of the first customer slot in occupy
}

func (e *Engine) dayOf(ctx context.Context, ri *resourceInfo, date string, svc *serviceInfo) ([]SlotAvailability, error) {
	loc := ri.venue.loc
	day, err := time.ParseInLocation(dayLayout, date, loc)
	if err != nil || day.Year() < 2000 || day.Year() > 9998 {
		return nil, Invalid("invalid_date", "date %q is not a YYYY-MM-DD date between 2000 and 9998", date)
	}
	if ri.plan == nil {
		return []SlotAvailability{}, nil
	}
	grid := ri.plan.daySlots(day, loc)
	var cands []candidate
	for _, s := range grid {
		c := candidate{start: s.start, end: s.end}
		if svc == nil {
			c.occupy, c.custom = []slot{s}, 1
		} else {
			c.end = s.start.Add(time.Duration(svc.svc.DurationMinutes) * time.Minute)
			own, ok := ri.plan.window(c.start, c.end, loc)
			if !ok {
				continue // the service does not fit before closing
			}
			occ, ok := ri.plan.window(c.start.Add(-time.Duration(svc.svc.PrepMinutes)*time.Minute),
				c.end.Add(time.Duration(svc.svc.CleanupMinutes)*time.Minute), loc)
			if ok {
				c.occupy, c.custom = occ, len(own)
				for i, o := range occ {
					if o.start.Equal(own[0].start) {
						c.first = i
					}
				}
			}
		}
		cands = append(cands, c)
	}
	// One read of every field the day's candidates touch.
	index := map[string]int{}
	var fields []string
	var days []string
	for _, c := range cands {
		f, d := slotFields(ri.res.ID, c.occupy)
		for _, x := range f {
			if _, ok := index[x]; !ok {
				index[x] = len(fields)
				fields = append(fields, x)
			}
		}
		for _, x := range d {
			if !containsString(days, x) {
				days = append(days, x)
			}
		}
	}
	// Days beyond the horizon are not loaded: they are all too_far.
	var loadable []string
	for _, d := range days {
		t, _ := time.ParseInLocation(dayLayout, dayOfField(d), loc)
		if e.withinHorizon(ri, t) {
			loadable = append(loadable, d)
		}
	}
	now := e.clock.Now()
	caps, used := make([]int, len(fields)), make([]int, len(fields))
	if day.AddDate(0, 0, 2).After(now) { // an older day is all past: nothing to read
		if caps, used, err = e.readSlots(ctx, ri, loadable, fields); err != nil {
			return nil, err
		}
	}
	out := make([]SlotAvailability, 0, len(cands))
	for _, c := range cands {
		a := SlotAvailability{Start: c.start.In(loc), End: c.end.In(loc), ResourceID: ri.res.ID}
		a.Reason, a.Remaining = e.judge(ri, c, index, caps, used, now)
		a.Available = a.Reason == ""
		out = append(out, a)
	}
	return out, nil
}

// judge says why a candidate is not available ("" when it is) and how many units remain.
func (e *Engine) judge(ri *resourceInfo, c candidate, index map[string]int, caps, used []int, now time.Time) (string, int) {
	switch {
	case !c.end.After(now):
		return ReasonPast, 0
	case !e.withinHorizon(ri, localDay(c.start, ri.venue.loc)):
		return ReasonTooFar, 0
	case ri.res.Status != "active" || c.occupy == nil:
		return ReasonClosed, 0
	}
	remaining := -1
	ownFull, bufferFull := false, false
	for i, s := range c.occupy {
		f := SlotField(ri.res.ID, s.start.Unix()/60)
		j := index[f]
		if caps[j] < 0 {
			return ReasonClosed, 0
		}
		free := caps[j] - used[j]
		own := i >= c.first && i < c.first+c.custom
		if free <= 0 {
			if own {
				ownFull = true
			} else {
				bufferFull = true
			}
		}
		if remaining < 0 || free < remaining {
			remaining = free
		}
	}
	if remaining < 0 {
		remaining = 0
	}
	switch {
	case ownFull:
		return ReasonFull, 0
	case bufferFull:
		return ReasonBufferConflict, 0
	}
	return "", remaining
}

// readSlots reads capacity (-1 when closed) and units taken of fields, loading cold days first.
func (e *Engine) readSlots(ctx context.Context, ri *resourceInfo, days, fields []string) (caps, used []int, err error) {
	v := ri.res.VenueID
	k := e.keys
	caps, used = make([]int, len(fields)), make([]int, len(fields))
	for i := range caps {
		caps[i] = -1
	}
	if len(fields) == 0 {
		return caps, used, nil
	}
	args := []any{e.clock.Now().UnixMilli(), keep.Milliseconds(), k.HoldPrefix(v), strings.Join(days, ",")}
	for _, f := range fields {
		args = append(args, f)
	}
	for attempt := 0; attempt < 4; attempt++ {
		res, err := e.scripts.readSlots.Run(ctx, e.rdb, []string{k.Capacity(v), k.Used(v), k.Owners(v), k.Wheel(v), k.Days(v)}, args...).Slice()
		if err != nil {
			return nil, nil, backendErr("availability", err)
		}
		if res[0] == "cold" {
			if err := e.loadDay(ctx, ri, dayOfField(res[1].(string))); err != nil {
				return nil, nil, err
			}
			continue
		}
		c, u := res[1].([]any), res[2].([]any)
		for i := range fields {
			if s, ok := c[i].(string); ok {
				caps[i], _ = strconv.Atoi(s)
			}
			if s, ok := u[i].(string); ok {
				used[i], _ = strconv.Atoi(s)
			}
		}
		return caps, used, nil
	}
	return nil, nil, backendErr("availability", errors.New("day would not load"))
}

func containsString(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
