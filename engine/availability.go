package engine

import (
	"context"
	"slices"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/catalog"
	"github.com/slotwheel/slotwheel/internal/redisstore"
)

// AvailabilityQuery asks for one venue-local day of a resource, or of a service (optionally on one
// of its resources).
type AvailabilityQuery struct {
	ResourceID uint64
	ServiceID  uint64
	Date       string // YYYY-MM-DD, venue-local
}

// SlotAvailability is one bookable start of a day. Times are in the venue's zone.
type SlotAvailability struct {
	Start      time.Time
	End        time.Time
	ResourceID uint64
	Available  bool
	Remaining  int
	Reason     string
}

// Availability answers one venue-local day of a resource, or of a service on each of its resources
// (or the one named), from Redis; a cold day is loaded from SQL first.
func (cg *Catalog) Availability(ctx context.Context, q AvailabilityQuery) ([]SlotAvailability, error) {
	if q.ResourceID == 0 && q.ServiceID == 0 {
		return nil, booking.Invalid("missing_resource_id", "resource_id or service_id is required").WithField("resource_id")
	}
	if q.ServiceID == 0 {
		ri, err := cg.cat.Resource(ctx, q.ResourceID)
		if err != nil {
			return nil, booking.Unknown(err, "unknown_resource", "resource %d does not exist", q.ResourceID)
		}
		return cg.dayOf(ctx, ri, nil, q.Date)
	}
	si, err := cg.cat.Service(ctx, q.ServiceID)
	if err != nil {
		return nil, booking.Unknown(err, "unknown_service", "service %d does not exist", q.ServiceID)
	}
	if len(si.Roles) > 0 {
		if q.ResourceID != 0 {
			return nil, booking.Invalid("invalid_resources", "service %d takes one resource per role: its availability names none", q.ServiceID).WithField("resource_id")
		}
		return cg.dayOfRoles(ctx, si, q.Date)
	}
	ids := si.ResourceIDs
	if q.ResourceID != 0 {
		if !slices.Contains(ids, q.ResourceID) {
			return nil, booking.Invalid("resource_not_in_service", "resource %d does not deliver service %d", q.ResourceID, q.ServiceID).WithField("resource_id")
		}
		ids = []uint64{q.ResourceID}
	}
	var out []SlotAvailability
	for _, id := range ids {
		ri, err := cg.cat.Resource(ctx, id)
		if err != nil {
			return nil, booking.Unknown(err, "unknown_resource", "resource %d does not exist", id)
		}
		slots, err := cg.dayOf(ctx, ri, si, q.Date)
		if err != nil {
			return nil, err
		}
		out = append(out, slots...)
	}
	return out, nil
}

func (cg *Catalog) dayOf(ctx context.Context, ri *catalog.ResourceInfo, si *catalog.ServiceInfo, date string) ([]SlotAvailability, error) {
	loc := ri.Venue.Loc
	day, err := time.ParseInLocation(booking.DayLayout, date, loc)
	if err != nil || day.Year() < 2000 || day.Year() > 9998 {
		return nil, booking.Invalid("invalid_date", "date %q is not a YYYY-MM-DD date between 2000 and 9998", date).WithField("date")
	}
	o := catalog.Offer(ri, si)
	cands := o.Candidates(day)
	// One read of every field the day's candidates touch.
	index := map[string]int{}
	var fields, days []string
	for _, c := range cands {
		f, d := redisstore.SlotFields(ri.Resource.ID, c.Occupy)
		for _, x := range f {
			if _, ok := index[x]; !ok {
				index[x] = len(fields)
				fields = append(fields, x)
			}
		}
		for _, x := range d {
			if !slices.Contains(days, x) {
				days = append(days, x)
			}
		}
	}
	now := cg.clock.Now()
	// Days beyond the horizon are not loaded: they are all too_far.
	var loadable []string
	for _, d := range days {
		t, _ := time.ParseInLocation(booking.DayLayout, redisstore.DayOf(d), loc)
		if ri.Plan.WithinHorizon(t, now, loc) {
			loadable = append(loadable, d)
		}
	}
	caps, used := make([]int, len(fields)), make([]int, len(fields))
	if day.AddDate(0, 0, 2).After(now) && len(fields) > 0 { // an older day is all past: nothing to read
		if caps, used, err = cg.readSlots(ctx, ri, loadable, fields); err != nil {
			return nil, err
		}
	}
	state := func(s booking.Slot) booking.SlotState {
		j := index[redisstore.SlotField(ri.Resource.ID, s.Start.Unix()/60)]
		return booking.SlotState{Open: caps[j] >= 0, Capacity: caps[j], Used: used[j]}
	}
	out := make([]SlotAvailability, 0, len(cands))
	for _, c := range cands {
		a := SlotAvailability{Start: c.Start.In(loc), End: c.End.In(loc), ResourceID: ri.Resource.ID}
		a.Reason, a.Remaining = o.Judge(c, state, now)
		a.Available = a.Reason == ""
		out = append(out, a)
	}
	return out, nil
}

// dayOfRoles answers a day of a service that needs several resources at once: a start is available
// when every role has a resource free for it, and its remaining count is how many more holds the
// scarcest role can take (the free units of its resources, summed). An unavailable start tells why
// its first role without room has none. The starts are those of the first role's first resource.
func (cg *Catalog) dayOfRoles(ctx context.Context, si *catalog.ServiceInfo, date string) ([]SlotAvailability, error) {
	per := map[uint64]map[int64]SlotAvailability{}
	var base []SlotAvailability
	for _, rid := range si.ResourceIDs {
		ri, err := cg.cat.Resource(ctx, rid)
		if err != nil {
			return nil, err
		}
		slots, err := cg.dayOf(ctx, ri, si, date)
		if err != nil {
			return nil, err
		}
		m := make(map[int64]SlotAvailability, len(slots))
		for _, a := range slots {
			m[a.Start.UnixMilli()] = a
		}
		per[rid] = m
		if rid == si.Roles[0].ResourceIDs[0] {
			base = slots
		}
	}
	out := make([]SlotAvailability, 0, len(base))
	for _, b := range base {
		a := SlotAvailability{Start: b.Start, End: b.End, Available: true, Remaining: -1}
		for _, role := range si.Roles {
			free, why := 0, ""
			for _, rid := range role.ResourceIDs {
				x, ok := per[rid][b.Start.UnixMilli()]
				switch {
				case ok && x.Available:
					free += x.Remaining
				case ok && why == "":
					why = x.Reason
				case !ok && why == "":
					why = booking.ReasonClosed // not on this resource's grid
				}
			}
			if free == 0 && a.Available {
				a.Available, a.Reason = false, why
			}
			if a.Remaining < 0 || free < a.Remaining {
				a.Remaining = free
			}
		}
		if !a.Available {
			a.Remaining = 0
		}
		out = append(out, a)
	}
	return out, nil
}

// readSlots reads capacity (-1 when closed) and units taken of fields, loading cold days first.
func (cg *Catalog) readSlots(ctx context.Context, ri *catalog.ResourceInfo, days, fields []string) (caps, used []int, err error) {
	for attempt := 0; attempt < 4; attempt++ {
		caps, used, cold, err := cg.rs.ReadSlots(ctx, ri.Resource.VenueID, cg.clock.Now(), days, fields)
		if err != nil {
			return nil, nil, err
		}
		if cold == "" {
			return caps, used, nil
		}
		if err := cg.loadDay(ctx, ri, redisstore.DayOf(cold)); err != nil {
			return nil, nil, err
		}
	}
	return nil, nil, redisstore.Unexpected("availability: day would not load")
}
