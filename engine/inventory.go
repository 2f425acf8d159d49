package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slotwheel/slotwheel/models"
)

// occupying lists the booking statuses whose units stay taken.
var occupying = []string{models.StatusConfirmed, models.StatusArrived, models.StatusInProgress}

func isOccupying(status string) bool {
	for _, s := range occupying {
		if s == status {
			return true
		}
	}
	return false
}

// keep is how long ended hold records stay readable, and how long tombstones last.
const keep = 24 * time.Hour

// loadDay fills one cold resource-day of Redis from SQL: its capacity and the bookings that occupy
// it. A day inside the horizon whose inventory was not generated yet (the daily extension has not
// run) is generated first.
func (e *Engine) loadDay(ctx context.Context, ri *resourceInfo, day string) error {
	loc := ri.venue.loc
	dayStart, err := time.ParseInLocation(dayLayout, day, loc)
	if err != nil {
		return fmt.Errorf("load day %q: %w", day, err)
	}
	var inv []models.SlotInventory
	if err := e.db.WithContext(ctx).Where("resource_id = ? AND day = ?", ri.res.ID, day).Order("start").Find(&inv).Error; err != nil {
		return backendErr("load inventory", err)
	}
	if len(inv) == 0 && ri.plan != nil && e.withinHorizon(ri, dayStart) && !dayStart.Before(localDay(e.clock.Now(), loc)) {
		if err := insertInventory(e.db.WithContext(ctx), ri.res, ri.plan, loc, dayStart, 1); err != nil {
			return backendErr("generate inventory", err)
		}
		if err := e.db.WithContext(ctx).Where("resource_id = ? AND day = ?", ri.res.ID, day).Order("start").Find(&inv).Error; err != nil {
			return backendErr("load inventory", err)
		}
	}
	var bookings []models.Booking
	if err := e.db.WithContext(ctx).Select("id, quantity, slots").
		Where("resource_id = ? AND status IN ? AND occupy_start < ? AND occupy_end > ?",
			ri.res.ID, occupying, dayStart.AddDate(0, 0, 1).UTC(), dayStart.UTC()).
		Find(&bookings).Error; err != nil {
		return backendErr("load bookings of day", err)
	}
	args := make([]any, 0, 2+2*len(inv)+3*len(bookings))
	args = append(args, DayField(ri.res.ID, day), len(inv))
	for _, s := range inv {
		args = append(args, SlotField(ri.res.ID, s.Start.Unix()/60), s.Capacity)
	}
	for _, b := range bookings {
		args = append(args, BookingOwner(b.ID), b.Quantity, b.Slots)
	}
	v := ri.res.VenueID
	k := e.keys
	err = e.scripts.loadDay.Run(ctx, e.rdb, []string{k.Capacity(v), k.Used(v), k.Owners(v), k.Gone(v), k.Days(v)}, args...).Err()
	return backendErr("load day into redis", err)
}

// capFieldsBetween lists the capacity fields of a resource whose slot starts in [from, to).
func (e *Engine) capFieldsBetween(ctx context.Context, venueID, resourceID uint64, from, to time.Time) ([]any, error) {
	var out []any
	prefix := strconv.FormatUint(resourceID, 10) + ":"
	iter := e.rdb.HScan(ctx, e.keys.Capacity(venueID), 0, prefix+"*", 1000).Iterator()
	lo, hi := from.Unix()/60, to.Unix()/60
	for i := 0; iter.Next(ctx); i++ {
		if i%2 == 1 { // values
			continue
		}
		f := iter.Val()
		m, err := strconv.ParseInt(strings.TrimPrefix(f, prefix), 10, 64)
		if err == nil && m >= lo && m < hi {
			out = append(out, f)
		}
	}
	if err := iter.Err(); err != nil {
		return nil, backendErr("scan capacity", err)
	}
	return out, nil
}

func (e *Engine) withinHorizon(ri *resourceInfo, day time.Time) bool {
	if ri.plan == nil {
		return false
	}
	last := localDay(e.clock.Now(), ri.venue.loc).AddDate(0, 0, ri.plan.horizonDays)
	return day.Before(last)
}

// slotFields names the Redis fields of slots, and the resource-days they lie in.
func slotFields(resourceID uint64, slots []slot) (fields []string, days []string) {
	fields = make([]string, len(slots))
	for i, s := range slots {
		fields[i] = SlotField(resourceID, s.start.Unix()/60)
		if len(days) == 0 || days[len(days)-1] != s.day {
			days = append(days, DayField(resourceID, s.day))
		}
	}
	return fields, days
}

// dayOfField extracts the date from a DayField.
func dayOfField(dayField string) string {
	_, d, _ := strings.Cut(dayField, ":")
	return d
}
