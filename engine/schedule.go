package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/catalog"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
)

// Schedule is a resource's opening rules.
type Schedule struct {
	ResourceID     uint64
	SlotMinutes    int
	Weekly         []booking.WeeklyRule
	Exceptions     []booking.ScheduleException
	HorizonDays    int
	GeneratedUntil string // first venue-local date without inventory
}

// ScheduleChange asks for new opening rules. CancelAffected cancels (as an admin cancels) the
// confirmed bookings that the new hours would no longer hold, instead of refusing the change.
type ScheduleChange struct {
	booking.ScheduleInput
	CancelAffected bool
}

// SetSchedule replaces a resource's opening rules, refusing a change that would close hours under
// confirmed bookings (see ChangeSchedule). The venue's manager or an admin.
func (cg *Catalog) SetSchedule(ctx context.Context, a booking.Actor, resourceID uint64, in booking.ScheduleInput) (Schedule, error) {
	return cg.ChangeSchedule(ctx, a, resourceID, ScheduleChange{ScheduleInput: in})
}

// ChangeSchedule replaces a resource's opening rules and regenerates its inventory from today on.
// Units already taken move with their holds and bookings onto the new grid. A change that would
// close or shrink hours under confirmed bookings, or put more units in a slot than it has, is
// ErrScheduleConflict listing the bookings (details "booking_ids"), unless CancelAffected asks for
// the closed-out bookings to be cancelled as an admin cancels them. Live holds on closed hours are
// given up. The venue's manager or an admin.
func (cg *Catalog) ChangeSchedule(ctx context.Context, a booking.Actor, resourceID uint64, ch ScheduleChange) (Schedule, error) {
	ri, err := cg.cat.Resource(ctx, resourceID)
	if err != nil {
		return Schedule{}, err
	}
	if err := a.RequireManager(ri.Resource.VenueID); err != nil {
		return Schedule{}, err
	}
	return cg.rebuild(ctx, a, ri, ch.ScheduleInput, ri.Resource.Capacity, ch.CancelAffected, booking.ErrScheduleConflict)
}

// rebuild regenerates a resource's inventory from today on with the opening rules in and capacity
// units a slot (a schedule change, or a capacity change on the same rules), and moves the units
// already taken onto it. Bookings it cannot hold are conflict (with their ids in "booking_ids"),
// unless cancelAffected has the venue cancel them, refunded in full.
func (cg *Catalog) rebuild(ctx context.Context, a booking.Actor, ri *catalog.ResourceInfo, in booking.ScheduleInput, capacity int,
	cancelAffected bool, conflict *booking.Error) (Schedule, error) {
	resourceID := ri.Resource.ID
	p, err := booking.BuildPlan(in)
	if err != nil {
		return Schedule{}, err
	}
	// Only a new grid is held to the services: a schedule of the same slot length stays changeable
	// even with a service that an earlier release let off the grid.
	if ri.Plan == nil || ri.Plan.SlotMinutes() != p.SlotMinutes() {
		if err := cg.servicesFit(ctx, ri, p.SlotMinutes()); err != nil {
			return Schedule{}, err
		}
	}
	if in.Weekly == nil {
		in.Weekly = []booking.WeeklyRule{}
	}
	if in.Exceptions == nil {
		in.Exceptions = []booking.ScheduleException{}
	}
	plan, err := cg.regrid(ctx, ri, p, capacity, conflict)
	if err != nil {
		return Schedule{}, err
	}
	if len(plan.closed) > 0 {
		if !cancelAffected {
			return Schedule{}, listConflict(conflict, plan.closed)
		}
		if err := cg.cancelForVenue(ctx, a, plan.closed, "the resource's hours or capacity changed"); err != nil {
			return Schedule{}, err
		}
		// Without the cancelled bookings, the new grid must still hold everyone else.
		if plan, err = cg.regrid(ctx, ri, p, capacity, conflict); err != nil {
			return Schedule{}, err
		}
		if len(plan.closed) > 0 {
			return Schedule{}, listConflict(conflict, plan.closed)
		}
	}
	now := cg.clock.Now()
	loc := ri.Venue.Loc
	today := booking.LocalDay(now, loc)
	generatedUntil := today.AddDate(0, 0, in.HorizonDays).Format(booking.DayLayout)
	moves := map[uint64][]string{}
	for _, o := range plan.occupants {
		if id, ok := o.Owner.Booking(); ok {
			moves[id] = o.Fields
		}
	}
	oldDays, err := cg.ss.SetSchedule(ctx, sqlstore.ScheduleChange{ResourceID: resourceID, Schedule: in,
		GeneratedUntil: generatedUntil, FromDay: today.Format(booking.DayLayout),
		Slots: inventorySlots(p, loc, today, in.HorizonDays), Capacity: capacity, Moves: moves, Now: now})
	if ce, ok := errors.AsType[*sqlstore.CapacityError](err); ok {
		// The ledger counted more units on a new slot than it has: bookings confirmed since the plan
		// was made (Redis had not seen them), which the new grid cannot hold.
		slices.Sort(ce.Bookings)
		return Schedule{}, listConflict(conflict, slices.Compact(ce.Bookings))
	}
	if err != nil {
		return Schedule{}, err
	}
	// Forget the regenerated days in Redis so they reload with the new grid, and move the units of
	// bookings and live holds onto it.
	if err := cg.applyRegrid(ctx, ri, oldDays, plan.occupants); err != nil {
		return Schedule{}, err
	}
	for _, id := range plan.lapsed {
		if r, err := cg.holds.readHold(ctx, id); err == nil {
			if _, err := cg.rs.CancelHold(ctx, r, now); err != nil {
				cg.log.Warn("give up a hold under closed hours", "hold_id", id, "err", err)
			}
		}
	}
	// In force everywhere once the days are regridded: a hold read at the old version is refused.
	if err := cg.cat.ChangedResource(ctx, resourceID, ri.Resource.VenueID); err != nil {
		return Schedule{}, err
	}
	return Schedule{ResourceID: resourceID, SlotMinutes: in.SlotMinutes, Weekly: in.Weekly, Exceptions: in.Exceptions,
		HorizonDays: in.HorizonDays, GeneratedUntil: generatedUntil}, nil
}

func errorsIsInvalidTransition(err error) bool {
	e, ok := booking.AsError(err)
	return ok && e.Code == booking.ErrInvalidTransition.Code
}

// servicesFit refuses a grid of slotMinutes that a service delivered on ri would end off (its
// duration not a whole number of slots): 422 invalid_slot_minutes naming the services.
func (cg *Catalog) servicesFit(ctx context.Context, ri *catalog.ResourceInfo, slotMinutes int) error {
	svcs, links, err := cg.ss.Services(ctx, ri.Resource.VenueID)
	if err != nil {
		return err
	}
	var off []string
	for _, sv := range svcs {
		for _, l := range links[sv.ID] {
			if l.ResourceID == ri.Resource.ID && booking.CheckServiceDuration(sv.DurationMinutes, slotMinutes) != nil {
				off = append(off, strconv.FormatUint(sv.ID, 10))
				break
			}
		}
	}
	if len(off) == 0 {
		return nil
	}
	return booking.Invalid("invalid_slot_minutes", "slot_minutes %d does not divide the duration of the resource's services %v",
		slotMinutes, off).WithField(string(booking.FieldSlotMinutes)).WithDetail("service_ids", off)
}

// listConflict is conflict naming the bookings ids in its details.
func listConflict(conflict *booking.Error, ids []uint64) error {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(id, 10)
	}
	return conflict.WithDetail("booking_ids", s)
}

// regridPlan is where a resource's occupants go on a new grid.
type regridPlan struct {
	occupants []redisstore.Move // bookings and live holds, with their fields on the new grid
	closed    []uint64          // bookings the new grid does not hold (closed hours, or overfull)
	lapsed    []string          // live holds on hours the new grid closes
}

// regrid computes the slots every future occupying booking and every live hold of a resource takes
// on the new plan with capacity units a slot. Slot counters are kept per slot, so units must move
// onto the new grid with the schedule, or the new slots would look free under them (an oversell).
// Bookings the new grid cannot hold — under closed hours, or the newest where a slot has too few
// units (booking.Fit) — are in closed; live holds that no longer fit under closed hours are in lapsed.
// Live holds that would overfill a slot are conflict, naming the bookings on those slots: a hold is
// neither cancelled nor given up for a change, which waits until it is paid or lapses.
func (cg *Catalog) regrid(ctx context.Context, ri *catalog.ResourceInfo, p *booking.Plan, capacity int, conflict *booking.Error) (regridPlan, error) {
	now := cg.clock.Now()
	loc := ri.Venue.Loc
	rows, err := cg.ss.OccupyingBetween(ctx, ri.Resource.ID, now, now.AddDate(2, 0, 0))
	if err != nil {
		return regridPlan{}, err
	}
	var out regridPlan
	var occupants []booking.Occupant
	var moves []redisstore.Move // where each of occupants goes, by the same index
	for _, b := range rows {
		slots, ok := p.Window(b.OccupyStart, b.OccupyEnd, loc)
		if !ok {
			out.closed = append(out.closed, b.ID)
			continue
		}
		fields, _ := redisstore.SlotFields(ri.Resource.ID, slots)
		occupants = append(occupants, booking.Occupant{BookingID: b.ID, Quantity: b.Quantity, Slots: fields})
		// A multi-resource booking keeps its units on its other resources.
		moves = append(moves, redisstore.Move{Owner: redisstore.BookingOwner(b.ID),
			Fields: append(otherResources(b.Fields, ri.Resource.ID), fields...)})
	}
	// Live holds count too: their owners may pay for them.
	owners, err := cg.rs.Owners(ctx, ri.Resource.VenueID)
	if err != nil {
		return regridPlan{}, err
	}
	for _, o := range owners {
		id, isHold := o.Hold()
		if !isHold {
			continue
		}
		r, ok, err := cg.rs.ReadHold(ctx, id)
		if err != nil {
			return regridPlan{}, err
		}
		if !ok || r.ResourceID != ri.Resource.ID {
			continue // a hold without a record is freed by reconciliation
		}
		slots, fits := p.Window(r.OccupyStart, r.OccupyEnd, loc)
		if !fits {
			out.lapsed = append(out.lapsed, id)
			continue
		}
		fields, _ := redisstore.SlotFields(ri.Resource.ID, slots)
		occupants = append(occupants, booking.Occupant{HoldID: id, Quantity: r.Quantity, Slots: fields})
		moves = append(moves, redisstore.Move{Owner: o, Fields: fields})
	}
	over := booking.Fit(capacity, occupants)
	if over.HoldsInTheWay {
		return regridPlan{}, listConflict(conflict, over.Conflicted)
	}
	out.closed = append(out.closed, over.Excess...)
	for i, o := range occupants {
		if o.HoldID != "" || !slices.Contains(over.Excess, o.BookingID) {
			out.occupants = append(out.occupants, moves[i])
		}
	}
	slices.Sort(out.closed)
	return out, nil
}

// cancelForVenue has the venue cancel bookings ids, refunded in full, for why (into their
// histories); one already over is left as it is.
func (cg *Catalog) cancelForVenue(ctx context.Context, a booking.Actor, ids []uint64, why string) error {
	d := Decision{Reason: why, FullRefund: true}
	for _, id := range ids {
		if _, err := cg.bookings.VenueCancel(ctx, a, id, d); err != nil && !errorsIsInvalidTransition(err) {
			return fmt.Errorf("cancel booking %d (%s): %w", id, why, err)
		}
	}
	return nil
}

// otherResources are the slot fields of resources other than resourceID among fields.
func otherResources(fields []string, resourceID uint64) []string {
	var out []string
	for _, f := range fields {
		if redisstore.FieldResource(f) != resourceID {
			out = append(out, f)
		}
	}
	return out
}

// applyRegrid forgets the resource's old days in Redis and moves every occupant onto the new grid in
// one script, so that no hold sees the new slots without the units under them.
func (cg *Catalog) applyRegrid(ctx context.Context, ri *catalog.ResourceInfo, oldDays []string, moves []redisstore.Move) error {
	v := ri.Resource.VenueID
	var fields, dayFields []string
	for _, day := range oldDays {
		dayStart, err := time.ParseInLocation(booking.DayLayout, day, ri.Venue.Loc)
		if err != nil {
			continue
		}
		f, err := cg.rs.CapacityFields(ctx, v, ri.Resource.ID, dayStart.UTC(), dayStart.AddDate(0, 0, 1).UTC())
		if err != nil {
			return err
		}
		fields = append(fields, f...)
		dayFields = append(dayFields, redisstore.DayField(ri.Resource.ID, day))
	}
	return cg.rs.Regrid(ctx, v, dayFields, fields, moves)
}

// inventorySlots are the slots of days [from, from+n).
func inventorySlots(p *booking.Plan, loc *time.Location, from time.Time, n int) []booking.Slot {
	var slots []booking.Slot
	for i := 0; i < n; i++ {
		slots = append(slots, p.DaySlots(from.AddDate(0, 0, i), loc)...)
	}
	return slots
}

// extendInventory keeps every schedule's inventory generated horizon_days ahead (run by
// reconciliation, so a day comes into sale without anyone touching the schedule).
func (cg *Catalog) extendInventory(ctx context.Context) (int, error) {
	scheds, err := cg.ss.Schedules(ctx)
	if err != nil {
		return 0, err
	}
	days := 0
	for _, s := range scheds {
		ri, err := cg.cat.Resource(ctx, s.ResourceID)
		if err != nil || ri.Plan == nil {
			continue
		}
		loc := ri.Venue.Loc
		today := booking.LocalDay(cg.clock.Now(), loc)
		want := today.AddDate(0, 0, s.HorizonDays)
		from, err := time.ParseInLocation(booking.DayLayout, s.GeneratedUntil, loc)
		if err != nil || from.Before(today) {
			from = today
		}
		n := 0
		for d := from; d.Before(want); d = d.AddDate(0, 0, 1) {
			n++
		}
		if n == 0 {
			continue
		}
		if err := cg.ss.ExtendInventory(ctx, s.ResourceID, ri.Resource.Capacity, inventorySlots(ri.Plan, loc, from, n), want.Format(booking.DayLayout)); err != nil {
			return days, err
		}
		days += n
	}
	return days, nil
}

// loadDay fills one cold resource-day of Redis from SQL: its capacity and the bookings that occupy
// it. A day inside the horizon whose inventory was not generated yet (the daily extension has not
// run) is generated first.
func (cg *Catalog) loadDay(ctx context.Context, ri *catalog.ResourceInfo, day string) error {
	loc := ri.Venue.Loc
	dayStart, err := time.ParseInLocation(booking.DayLayout, day, loc)
	if err != nil {
		return fmt.Errorf("load day %q: %w", day, err)
	}
	inv, err := cg.ss.Inventory(ctx, ri.Resource.ID, day)
	if err != nil {
		return err
	}
	now := cg.clock.Now()
	if len(inv) == 0 && ri.Plan != nil && ri.Plan.WithinHorizon(dayStart, now, loc) && !dayStart.Before(booking.LocalDay(now, loc)) {
		if err := cg.ss.InsertInventory(ctx, ri.Resource.ID, ri.Resource.Capacity, inventorySlots(ri.Plan, loc, dayStart, 1)); err != nil {
			return err
		}
		if inv, err = cg.ss.Inventory(ctx, ri.Resource.ID, day); err != nil {
			return err
		}
	}
	bookings, err := cg.ss.OccupyingBetween(ctx, ri.Resource.ID, dayStart, dayStart.AddDate(0, 0, 1))
	if err != nil {
		return err
	}
	caps := make([]redisstore.FieldCapacity, len(inv))
	for i, s := range inv {
		caps[i] = redisstore.FieldCapacity{Field: redisstore.SlotField(ri.Resource.ID, s.Start.Unix()/60), Capacity: s.Capacity}
	}
	bs := make([]redisstore.BookingUnits, len(bookings))
	for i := range bookings {
		bs[i] = units(&bookings[i])
	}
	return cg.rs.LoadDay(ctx, ri.Resource.VenueID, redisstore.DayField(ri.Resource.ID, day), caps, bs)
}

// DemoVenueName names the venue EnsureDemo creates.
const DemoVenueName = "Demo Tennis Courts"

// DemoDeskName names the demo's 24-hour desk: whatever the time of day, one of its slots is in
// progress or starts within 15 minutes, and a booking of it is released a minute after start (or
// after paying, for a slot already running), so a newcomer sees a check-in and a release at once.
const DemoDeskName = "Hot desk"

// EnsureDemo creates the seeds' court venue if it is missing — four courts open 08:30–22:00 every
// day in 90-minute slots, released 15 minutes after start when nobody turns up — and its 24-hour
// desk (added to a demo venue made before the desk existed).
func (cg *Catalog) EnsureDemo(ctx context.Context) (Venue, bool, error) {
	existing, ok, err := cg.ss.VenueByName(ctx, DemoVenueName)
	if err != nil {
		return Venue{}, false, err
	}
	if ok {
		return cg.toVenue(existing), false, cg.ensureDemoDesk(ctx, existing.ID)
	}
	v, err := cg.CreateVenue(ctx, booking.System, VenueInput{Name: DemoVenueName, Timezone: "Asia/Shanghai"})
	if err != nil {
		return Venue{}, false, err
	}
	if _, err := cg.SetGracePolicy(ctx, booking.System, GracePolicy{Category: "court", GraceSeconds: 15 * 60}); err != nil {
		return Venue{}, false, err
	}
	for _, name := range []string{"Court 1", "Court 2", "Court 3", "Court 4"} {
		if err := cg.demoResource(ctx, v.ID, name, "court", 1, 8000, 90, "08:30", "22:00"); err != nil {
			return Venue{}, false, err
		}
	}
	return v, true, cg.ensureDemoDesk(ctx, v.ID)
}

func (cg *Catalog) ensureDemoDesk(ctx context.Context, venueID uint64) error {
	rs, err := cg.ListResources(ctx, venueID)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Name == DemoDeskName {
			return nil
		}
	}
	if _, err := cg.SetGracePolicy(ctx, booking.System, GracePolicy{Category: "desk", GraceSeconds: 60}); err != nil {
		return err
	}
	return cg.demoResource(ctx, venueID, DemoDeskName, "desk", 4, 1500, 15, "00:00", "24:00")
}

func (cg *Catalog) demoResource(ctx context.Context, venueID uint64, name, kind string, capacity int, price int64, slot int, open, close string) error {
	r, err := cg.CreateResource(ctx, booking.System, ResourceInput{VenueID: venueID, Name: name, Kind: kind, Capacity: capacity,
		Category: kind, PriceCents: price})
	if err != nil {
		return err
	}
	_, err = cg.SetSchedule(ctx, booking.System, r.ID, booking.ScheduleInput{SlotMinutes: slot, HorizonDays: 14,
		Weekly: []booking.WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: open, Close: close}}})
	return err
}
