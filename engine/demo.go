package engine

import (
	"context"
	"errors"

	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/models"
)

// DemoVenueName names the venue EnsureDemo creates.
const DemoVenueName = "Demo Tennis Courts"

// EnsureDemo creates the seeds' court venue if it is missing: four courts open 08:30–22:00 every day
// in 90-minute slots, released 15 minutes after start when nobody turns up.
func (e *Engine) EnsureDemo(ctx context.Context) (Venue, bool, error) {
	var existing models.Venue
	err := e.db.WithContext(ctx).Where("name = ?", DemoVenueName).First(&existing).Error
	if err == nil {
		return toVenue(existing), false, nil
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return Venue{}, false, backendErr("demo", err)
	}
	v, err := e.CreateVenue(ctx, System, VenueInput{Name: DemoVenueName, Timezone: "Asia/Shanghai"})
	if err != nil {
		return Venue{}, false, err
	}
	if _, err := e.SetGracePolicy(ctx, System, GracePolicy{Category: "court", GraceSeconds: 15 * 60}); err != nil {
		return Venue{}, false, err
	}
	for _, name := range []string{"Court 1", "Court 2", "Court 3", "Court 4"} {
		r, err := e.CreateResource(ctx, System, ResourceInput{VenueID: v.ID, Name: name, Kind: "court", Capacity: 1,
			Category: "court", PriceCents: 8000})
		if err != nil {
			return Venue{}, false, err
		}
		_, err = e.SetSchedule(ctx, System, r.ID, ScheduleInput{SlotMinutes: 90, HorizonDays: 14,
			Weekly: []WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: "08:30", Close: "22:00"}}})
		if err != nil {
			return Venue{}, false, err
		}
	}
	return v, true, nil
}
