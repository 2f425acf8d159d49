package engine

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/slotwheel/slotwheel/models"
)

// A schedule change moves slot boundaries, and slot counters are kept per slot: a booking's units
// must move onto the new grid with it, or the new slots would look free under it (an oversell).

// occupant is a booking whose slot fields change with the new grid.
type occupant struct {
	id    uint64
	slots string
}

// regrid computes the slots every future occupying booking of a resource takes on the new plan, and
// refuses a plan under which booked units would exceed a slot's capacity.
func (e *Engine) regrid(ctx context.Context, ri *resourceInfo, p *plan) ([]occupant, error) {
	var rows []models.Booking
	if err := e.db.WithContext(ctx).Select("id, quantity, occupy_start, occupy_end, slots").
		Where("resource_id = ? AND status IN ? AND occupy_end > ?", ri.res.ID, occupying, e.clock.Now()).
		Find(&rows).Error; err != nil {
		return nil, backendErr("regrid", err)
	}
	load := map[string]int{}
	var changed []occupant
	for _, b := range rows {
		slots, _ := p.window(b.OccupyStart, b.OccupyEnd, ri.venue.loc)
		fields, _ := slotFields(ri.res.ID, slots)
		for _, f := range fields {
			load[f] += b.Quantity
			if load[f] > ri.res.Capacity {
				return nil, ErrScheduleConflict
			}
		}
		if s := joinFields(fields); s != b.Slots {
			changed = append(changed, occupant{id: b.ID, slots: s})
		}
	}
	return changed, nil
}

// remapOccupants moves counted units in Redis onto the new grid: the bookings regrid found, and the
// live holds of the resource.
func (e *Engine) remapOccupants(ctx context.Context, ri *resourceInfo, p *plan, bookings []occupant) error {
	v := ri.res.VenueID
	k := e.keys
	for _, o := range bookings {
		if err := e.scripts.remapOwner.Run(ctx, e.rdb, []string{k.Owners(v), k.Used(v), k.Owners(v)},
			BookingOwner(o.id), o.slots, "0").Err(); err != nil {
			return backendErr("regrid", err)
		}
	}
	owners, err := e.rdb.HGetAll(ctx, k.Owners(v)).Result()
	if err != nil {
		return backendErr("regrid", err)
	}
	mine := "|" + strconv.FormatUint(ri.res.ID, 10) + ":"
	for owner, val := range owners {
		id, isHold := strings.CutPrefix(owner, "h:")
		if !isHold || !strings.Contains(val, mine) {
			continue
		}
		m, err := e.rdb.HMGet(ctx, k.Hold(v, id), "ostart_ms", "oend_ms").Result()
		if err != nil {
			return backendErr("regrid", err)
		}
		from, err1 := strconv.ParseInt(str(m[0]), 10, 64)
		to, err2 := strconv.ParseInt(str(m[1]), 10, 64)
		if err1 != nil || err2 != nil {
			continue // a hold without a record: reconciliation frees it
		}
		slots, _ := p.window(time.UnixMilli(from), time.UnixMilli(to), ri.venue.loc)
		fields, _ := slotFields(ri.res.ID, slots)
		if err := e.scripts.remapOwner.Run(ctx, e.rdb, []string{k.Owners(v), k.Used(v), k.Hold(v, id)},
			owner, joinFields(fields), "1").Err(); err != nil {
			return backendErr("regrid", err)
		}
	}
	return nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
