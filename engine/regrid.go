package engine

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/slotwheel/slotwheel/models"
)

// A schedule change moves slot boundaries, and slot counters are kept per slot: the units of
// bookings and live holds must move onto the new grid with it, or the new slots would look free
// under them (an oversell).

// occupant is a booking or live hold of the resource and the slot fields it takes on the new grid.
type occupant struct {
	owner     string
	bookingID uint64 // 0 for a hold
	slots     string
	changed   bool
}

// regrid computes the slots every future occupying booking and every live hold of a resource takes
// on the new plan, and refuses a plan under which their units would exceed a slot's capacity.
func (e *Engine) regrid(ctx context.Context, ri *resourceInfo, p *plan) ([]occupant, error) {
	var rows []models.Booking
	if err := e.db.WithContext(ctx).Select("id, quantity, occupy_start, occupy_end, slots").
		Where("resource_id = ? AND status IN ? AND occupy_end > ?", ri.res.ID, occupying, e.clock.Now()).
		Find(&rows).Error; err != nil {
		return nil, backendErr("regrid", err)
	}
	load := map[string]int{}
	var out []occupant
	add := func(o occupant, qty int, from, to time.Time) error {
		slots, _ := p.window(from, to, ri.venue.loc)
		fields, _ := slotFields(ri.res.ID, slots)
		for _, f := range fields {
			load[f] += qty
			if load[f] > ri.res.Capacity {
				return ErrScheduleConflict
			}
		}
		s := joinFields(fields)
		o.changed = s != o.slots
		o.slots = s
		out = append(out, o)
		return nil
	}
	for _, b := range rows {
		if err := add(occupant{owner: BookingOwner(b.ID), bookingID: b.ID, slots: b.Slots}, b.Quantity, b.OccupyStart, b.OccupyEnd); err != nil {
			return nil, err
		}
	}
	// Live holds count too: their owners may pay for them.
	v := ri.res.VenueID
	owners, err := e.rdb.HKeys(ctx, e.keys.Owners(v)).Result()
	if err != nil {
		return nil, backendErr("regrid", err)
	}
	for _, owner := range owners {
		id, isHold := strings.CutPrefix(owner, "h:")
		if !isHold {
			continue
		}
		m, err := e.rdb.HMGet(ctx, e.keys.Hold(v, id), "resource", "qty", "ostart_ms", "oend_ms").Result()
		if err != nil {
			return nil, backendErr("regrid", err)
		}
		if str(m[0]) != strconv.FormatUint(ri.res.ID, 10) {
			continue
		}
		qty, _ := strconv.Atoi(str(m[1]))
		from, err1 := strconv.ParseInt(str(m[2]), 10, 64)
		to, err2 := strconv.ParseInt(str(m[3]), 10, 64)
		if err1 != nil || err2 != nil {
			continue // a hold without a record: reconciliation frees it
		}
		if err := add(occupant{owner: owner}, qty, time.UnixMilli(from), time.UnixMilli(to)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// applyRegrid forgets the resource's old days in Redis and moves every occupant onto the new grid in
// one script, so that no hold sees the new slots without the units under them.
func (e *Engine) applyRegrid(ctx context.Context, ri *resourceInfo, oldDays []string, occupants []occupant) error {
	v := ri.res.VenueID
	k := e.keys
	var fields []any
	for _, day := range oldDays {
		dayStart, err := time.ParseInLocation(dayLayout, day, ri.venue.loc)
		if err != nil {
			continue
		}
		f, err := e.capFieldsBetween(ctx, v, ri.res.ID, dayStart.UTC(), dayStart.AddDate(0, 0, 1).UTC())
		if err != nil {
			return err
		}
		fields = append(fields, f...)
	}
	args := []any{k.HoldPrefix(v), len(oldDays)}
	for _, day := range oldDays {
		args = append(args, DayField(ri.res.ID, day))
	}
	args = append(args, len(fields))
	args = append(args, fields...)
	for _, o := range occupants {
		args = append(args, o.owner, o.slots)
	}
	err := e.scripts.regrid.Run(ctx, e.rdb, []string{k.Capacity(v), k.Days(v), k.Owners(v), k.Used(v)}, args...).Err()
	return backendErr("regrid", err)
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
