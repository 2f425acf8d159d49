package sqlstore

import (
	"context"
	"errors"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/slotwheel/slotwheel/models"
)

// Catalog is what can be booked: venues, resources with their schedules and slot inventory,
// services, and the policies that govern bookings (grace, a resource's booking rules, the no-show
// freeze). Reads made under OnReleasePath use the release path's connections (see catalogDB).
type Catalog struct{ *shared }

// CreateVenue inserts a venue and fills in its id.
func (s *Catalog) CreateVenue(ctx context.Context, v *models.Venue) error {
	return mapErr("create venue", s.db.WithContext(ctx).Create(v).Error)
}

// UpdateVenue writes the columns of v named by cols.
func (s *Catalog) UpdateVenue(ctx context.Context, v *models.Venue, cols ...string) error {
	res := s.db.WithContext(ctx).Model(v).Select(cols).Updates(v)
	if res.Error == nil && res.RowsAffected == 0 {
		return errNotFound
	}
	return mapErr("update venue", res.Error)
}

// Venues lists every venue by id.
func (s *Catalog) Venues(ctx context.Context) ([]models.Venue, error) {
	var rows []models.Venue
	return rows, mapErr("list venues", s.db.WithContext(ctx).Order("id").Find(&rows).Error)
}

// Venue reads one venue.
func (s *Catalog) Venue(ctx context.Context, id uint64) (models.Venue, error) {
	var v models.Venue
	return v, mapErr("read venue", s.catalogDB(ctx).First(&v, id).Error)
}

// VenueByName finds a venue by name; false when there is none.
func (s *Catalog) VenueByName(ctx context.Context, name string) (models.Venue, bool, error) {
	var v models.Venue
	err := s.db.WithContext(ctx).Where("name = ?", name).First(&v).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return v, false, nil
	}
	return v, err == nil, mapErr("find venue", err)
}

// VenueIDs lists every venue id.
func (s *Catalog) VenueIDs(ctx context.Context) ([]uint64, error) {
	ids := []uint64{}
	return ids, mapErr("list venues", s.db.WithContext(ctx).Model(&models.Venue{}).Order("id").Pluck("id", &ids).Error)
}

// CreateResource inserts a resource and fills in its id.
func (s *Catalog) CreateResource(ctx context.Context, r *models.Resource) error {
	return mapErr("create resource", s.db.WithContext(ctx).Create(r).Error)
}

// UpdateResource writes the columns of r named by cols.
func (s *Catalog) UpdateResource(ctx context.Context, r *models.Resource, cols ...string) error {
	res := s.db.WithContext(ctx).Model(r).Select(cols).Updates(r)
	if res.Error == nil && res.RowsAffected == 0 {
		return errNotFound
	}
	return mapErr("update resource", res.Error)
}

// Resources lists resources by id, of one venue when venueID != 0.
func (s *Catalog) Resources(ctx context.Context, venueID uint64) ([]models.Resource, error) {
	q := s.catalogDB(ctx).Order("id")
	if venueID != 0 {
		q = q.Where("venue_id = ?", venueID)
	}
	var rows []models.Resource
	return rows, mapErr("list resources", q.Find(&rows).Error)
}

// Resource reads one resource and its schedule (nil when it has none).
func (s *Catalog) Resource(ctx context.Context, id uint64) (models.Resource, *models.Schedule, error) {
	var r models.Resource
	if err := s.db.WithContext(ctx).First(&r, id).Error; err != nil {
		return r, nil, mapErr("read resource", err)
	}
	var sc models.Schedule
	err := s.db.WithContext(ctx).First(&sc, "resource_id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return r, nil, nil
	}
	if err != nil {
		return r, nil, mapErr("read schedule", err)
	}
	return r, &sc, nil
}

// Schedules lists every schedule.
func (s *Catalog) Schedules(ctx context.Context) ([]models.Schedule, error) {
	var rows []models.Schedule
	return rows, mapErr("list schedules", s.db.WithContext(ctx).Find(&rows).Error)
}

// ScheduleChange is a new schedule with everything that moves with it, written in one transaction.
type ScheduleChange struct {
	Schedule models.Schedule
	FromDay  string                 // venue-local date from which inventory is regenerated
	Slots    []models.SlotInventory // the new inventory
	Moves    map[uint64][]string    // booking id → its slot fields on the new grid
	// Now is when the change is made: a slot from then on whose bookings would take more units than
	// it has refuses the change.
	Now time.Time
}

// SetSchedule replaces a resource's schedule and its inventory from FromDay on, moves bookings' slot
// fields onto the new grid and counts their units on the new slots' ledger, refusing the change
// (*CapacityError) when a slot that has not started would hold more than its capacity. It answers
// the days whose inventory was replaced.
func (s *Catalog) SetSchedule(ctx context.Context, ch ScheduleChange) ([]string, error) {
	var oldDays []string
	rid := ch.Schedule.ResourceID
	err := s.tx(ctx, "set schedule", func(tx *gorm.DB) error {
		if err := tx.Model(&models.SlotInventory{}).Where("resource_id = ? AND day >= ?", rid, ch.FromDay).
			Distinct().Pluck("day", &oldDays).Error; err != nil {
			return err
		}
		if err := tx.Where("resource_id = ? AND day >= ?", rid, ch.FromDay).Delete(&models.SlotInventory{}).Error; err != nil {
			return err
		}
		if err := tx.Clauses(clause.OnConflict{UpdateAll: true}).Create(&ch.Schedule).Error; err != nil {
			return err
		}
		for id, fields := range ch.Moves {
			if err := tx.Model(&models.Booking{}).Where("id = ?", id).Update("slots", strings.Join(fields, ",")).Error; err != nil {
				return err
			}
		}
		if err := insertInventory(tx, ch.Slots); err != nil {
			return err
		}
		// The new rows start at zero: the ledger is counted again from the bookings now on them.
		rep, err := s.checkResource(tx, rid, time.Time{})
		if err != nil {
			return err
		}
		refused := &CapacityError{}
		for _, sl := range rep.Over {
			if k, _ := parseSlot(sl.Field); !k.start().Before(ch.Now) {
				refused.Slots = append(refused.Slots, sl.Field)
				refused.Bookings = append(refused.Bookings, sl.Bookings...)
			}
		}
		if len(refused.Slots) > 0 {
			return refused
		}
		return nil
	})
	return oldDays, err
}

func insertInventory(tx *gorm.DB, rows []models.SlotInventory) error {
	if len(rows) == 0 {
		return nil
	}
	return tx.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(rows, 500).Error
}

// ExtendInventory adds inventory rows and moves the schedule's generated_until, in one transaction.
func (s *Catalog) ExtendInventory(ctx context.Context, resourceID uint64, rows []models.SlotInventory, until string) error {
	return s.tx(ctx, "extend inventory", func(tx *gorm.DB) error {
		if err := insertInventory(tx, rows); err != nil {
			return err
		}
		return tx.Model(&models.Schedule{}).Where("resource_id = ?", resourceID).Update("generated_until", until).Error
	})
}

// InsertInventory adds inventory rows (existing ones are kept).
func (s *Catalog) InsertInventory(ctx context.Context, rows []models.SlotInventory) error {
	return mapErr("insert inventory", insertInventory(s.db.WithContext(ctx), rows))
}

// Inventory reads one resource-day's slots, by start.
func (s *Catalog) Inventory(ctx context.Context, resourceID uint64, day string) ([]models.SlotInventory, error) {
	var rows []models.SlotInventory
	return rows, mapErr("read inventory", s.db.WithContext(ctx).Where("resource_id = ? AND day = ?", resourceID, day).
		Order("start").Find(&rows).Error)
}

// CreateService inserts a service with the resources that can deliver it (with their roles, for a
// service that needs several at once).
func (s *Catalog) CreateService(ctx context.Context, svc *models.Service, links []models.ServiceResource) error {
	return s.tx(ctx, "create service", func(tx *gorm.DB) error {
		if err := tx.Create(svc).Error; err != nil {
			return err
		}
		for i := range links {
			links[i].ServiceID = svc.ID
		}
		return tx.Create(&links).Error
	})
}

// Services lists services by id, of one venue when venueID != 0, with their resources in order.
func (s *Catalog) Services(ctx context.Context, venueID uint64) ([]models.Service, map[uint64][]models.ServiceResource, error) {
	q := s.catalogDB(ctx).Order("id")
	if venueID != 0 {
		q = q.Where("venue_id = ?", venueID)
	}
	var rows []models.Service
	if err := q.Find(&rows).Error; err != nil {
		return nil, nil, mapErr("list services", err)
	}
	var links []models.ServiceResource
	if err := s.db.WithContext(ctx).Order("service_id, position, resource_id").Find(&links).Error; err != nil {
		return nil, nil, mapErr("list services", err)
	}
	by := map[uint64][]models.ServiceResource{}
	for _, l := range links {
		by[l.ServiceID] = append(by[l.ServiceID], l)
	}
	return rows, by, nil
}

// Service reads one service and its resources in order.
func (s *Catalog) Service(ctx context.Context, id uint64) (models.Service, []models.ServiceResource, error) {
	var svc models.Service
	if err := s.db.WithContext(ctx).First(&svc, id).Error; err != nil {
		return svc, nil, mapErr("read service", err)
	}
	var links []models.ServiceResource
	err := s.db.WithContext(ctx).Where("service_id = ?", id).Order("position, resource_id").Find(&links).Error
	return svc, links, mapErr("read service", err)
}

// SetGrace inserts or replaces a category's grace policy.
func (s *Catalog) SetGrace(ctx context.Context, g models.GracePolicy) error {
	return mapErr("set grace policy", s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&g).Error)
}

// Graces lists every grace policy.
func (s *Catalog) Graces(ctx context.Context) ([]models.GracePolicy, error) {
	var rows []models.GracePolicy
	return rows, mapErr("list grace policies", s.db.WithContext(ctx).Find(&rows).Error)
}

// Policy reads a resource's booking rules; false when it has none (the defaults apply).
func (s *Catalog) Policy(ctx context.Context, resourceID uint64) (models.ResourcePolicy, bool, error) {
	var rows []models.ResourcePolicy
	err := s.db.WithContext(ctx).Where("resource_id = ?", resourceID).Limit(1).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return models.ResourcePolicy{}, false, mapErr("read policy", err)
	}
	return rows[0], true, nil
}

// Policies reads the booking rules of resources that have some.
func (s *Catalog) Policies(ctx context.Context, resourceIDs []uint64) ([]models.ResourcePolicy, error) {
	var rows []models.ResourcePolicy
	return rows, mapErr("read policies", s.catalogDB(ctx).Where("resource_id IN ?", resourceIDs).Find(&rows).Error)
}

// SetPolicy stores a resource's booking rules.
func (s *Catalog) SetPolicy(ctx context.Context, p models.ResourcePolicy) error {
	return mapErr("set policy", s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&p).Error)
}

// NoshowPolicy reads the no-show freeze rule; false while it is off.
func (s *Catalog) NoshowPolicy(ctx context.Context) (models.NoshowPolicy, bool, error) {
	var rows []models.NoshowPolicy
	err := s.db.WithContext(ctx).Where("id = 1").Limit(1).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return models.NoshowPolicy{}, false, mapErr("read no-show policy", err)
	}
	return rows[0], true, nil
}

// SetNoshowPolicy stores the no-show freeze rule.
func (s *Catalog) SetNoshowPolicy(ctx context.Context, p models.NoshowPolicy) error {
	p.ID = 1
	return mapErr("set no-show policy", s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&p).Error)
}
