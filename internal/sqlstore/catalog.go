package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/sqlstore/sqldb"
	"github.com/slotwheel/slotwheel/models"
)

// Catalog is what can be booked: venues, resources with their schedules and slot inventory,
// services, and the policies that govern bookings (grace, a resource's booking rules, the no-show
// freeze). Reads made under OnReleasePath use the release path's connections (see catalogDB).
type Catalog struct {
	db     *sqldb.DB
	ledger *Ledger // a schedule change counts its resource's ledger again
}

type releasePathKey struct{}

// OnReleasePath marks ctx as the release path's: the catalog reads made under it (a release batch's
// venues and rules, see catalogDB) use the release path's connections too.
func OnReleasePath(ctx context.Context) context.Context {
	return context.WithValue(ctx, releasePathKey{}, true)
}

// catalogDB is the pool a catalog read under ctx uses: the release path's own under OnReleasePath.
func (s *Catalog) catalogDB(ctx context.Context) *gorm.DB {
	if on, _ := ctx.Value(releasePathKey{}).(bool); on {
		return s.db.Release.WithContext(ctx)
	}
	return s.db.WithContext(ctx)
}

// CreateVenue inserts a venue created at at and answers its row.
func (s *Catalog) CreateVenue(ctx context.Context, name, timezone string, at time.Time) (models.Venue, error) {
	v := models.Venue{Name: name, Timezone: timezone, CreatedAt: at}
	return v, sqldb.MapErr("create venue", s.db.WithContext(ctx).Create(&v).Error)
}

// UpdateVenue writes the columns of v named by cols.
func (s *Catalog) UpdateVenue(ctx context.Context, v *models.Venue, cols ...string) error {
	res := s.db.WithContext(ctx).Model(v).Select(cols).Updates(v)
	if res.Error == nil && res.RowsAffected == 0 {
		return sqldb.ErrNotFound
	}
	return sqldb.MapErr("update venue", res.Error)
}

// Venues lists every venue by id.
func (s *Catalog) Venues(ctx context.Context) ([]models.Venue, error) {
	var rows []models.Venue
	return rows, sqldb.MapErr("list venues", s.db.WithContext(ctx).Order("id").Find(&rows).Error)
}

// Venue reads one venue.
func (s *Catalog) Venue(ctx context.Context, id uint64) (models.Venue, error) {
	var v models.Venue
	return v, sqldb.MapErr("read venue", s.catalogDB(ctx).First(&v, id).Error)
}

// VenueByName finds a venue by name; false when there is none.
func (s *Catalog) VenueByName(ctx context.Context, name string) (models.Venue, bool, error) {
	var v models.Venue
	err := s.db.WithContext(ctx).Where("name = ?", name).First(&v).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return v, false, nil
	}
	return v, err == nil, sqldb.MapErr("find venue", err)
}

// VenueIDs lists every venue id.
func (s *Catalog) VenueIDs(ctx context.Context) ([]uint64, error) {
	ids := []uint64{}
	return ids, sqldb.MapErr("list venues", s.db.WithContext(ctx).Model(&models.Venue{}).Order("id").Pluck("id", &ids).Error)
}

// NewResource is what a new resource is made of.
type NewResource struct {
	VenueID    uint64
	Name, Kind string
	Capacity   int
	Category   string
	PriceCents int64
}

// CreateResource inserts an active resource created at at and answers its row.
func (s *Catalog) CreateResource(ctx context.Context, in NewResource, at time.Time) (models.Resource, error) {
	r := models.Resource{VenueID: in.VenueID, Name: in.Name, Kind: in.Kind, Capacity: in.Capacity,
		Category: in.Category, PriceCents: in.PriceCents, Status: models.ResourceActive, CreatedAt: at, UpdatedAt: at}
	return r, sqldb.MapErr("create resource", s.db.WithContext(ctx).Create(&r).Error)
}

// UpdateResource writes the columns of r named by cols.
func (s *Catalog) UpdateResource(ctx context.Context, r *models.Resource, cols ...string) error {
	res := s.db.WithContext(ctx).Model(r).Select(cols).Updates(r)
	if res.Error == nil && res.RowsAffected == 0 {
		return sqldb.ErrNotFound
	}
	return sqldb.MapErr("update resource", res.Error)
}

// UpdateService writes the columns of svc named by cols.
func (s *Catalog) UpdateService(ctx context.Context, svc *models.Service, cols ...string) error {
	res := s.db.WithContext(ctx).Model(svc).Select(cols).Updates(svc)
	if res.Error == nil && res.RowsAffected == 0 {
		return sqldb.ErrNotFound
	}
	return sqldb.MapErr("update service", res.Error)
}

// Resources lists resources by id, of one venue when venueID != 0.
func (s *Catalog) Resources(ctx context.Context, venueID uint64) ([]models.Resource, error) {
	q := s.catalogDB(ctx).Order("id")
	if venueID != 0 {
		q = q.Where("venue_id = ?", venueID)
	}
	var rows []models.Resource
	return rows, sqldb.MapErr("list resources", q.Find(&rows).Error)
}

// Resource reads one resource and its schedule (nil when it has none).
func (s *Catalog) Resource(ctx context.Context, id uint64) (models.Resource, *models.Schedule, error) {
	var r models.Resource
	if err := s.db.WithContext(ctx).First(&r, id).Error; err != nil {
		return r, nil, sqldb.MapErr("read resource", err)
	}
	var sc models.Schedule
	err := s.db.WithContext(ctx).First(&sc, "resource_id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return r, nil, nil
	}
	if err != nil {
		return r, nil, sqldb.MapErr("read schedule", err)
	}
	return r, &sc, nil
}

// Schedules lists every schedule.
func (s *Catalog) Schedules(ctx context.Context) ([]models.Schedule, error) {
	var rows []models.Schedule
	return rows, sqldb.MapErr("list schedules", s.db.WithContext(ctx).Find(&rows).Error)
}

// ScheduleChange is a new schedule with everything that moves with it, written in one transaction.
type ScheduleChange struct {
	ResourceID     uint64
	Schedule       booking.ScheduleInput // the opening rules (Weekly and Exceptions stored as JSON)
	GeneratedUntil string                // venue-local date up to which inventory is generated
	FromDay        string                // venue-local date from which inventory is regenerated
	Slots          []booking.Slot        // the new inventory
	Capacity       int                   // the units of each new slot, and the resource's from now on
	Moves          map[uint64][]string   // booking id → its slot fields on the new grid
	// Now is when the change is made (the schedule's updated_at): a slot from then on whose bookings
	// would take more units than it has refuses the change.
	Now time.Time
}

// scheduleRow is the row of a schedule set at at.
func scheduleRow(resourceID uint64, in booking.ScheduleInput, generatedUntil string, at time.Time) models.Schedule {
	if in.Weekly == nil {
		in.Weekly = []booking.WeeklyRule{}
	}
	if in.Exceptions == nil {
		in.Exceptions = []booking.ScheduleException{}
	}
	return models.Schedule{ResourceID: resourceID, SlotMinutes: in.SlotMinutes, Weekly: jsonText(in.Weekly),
		Exceptions: jsonText(in.Exceptions), HorizonDays: in.HorizonDays, GeneratedUntil: generatedUntil, UpdatedAt: at}
}

// inventoryRows are the inventory rows of a resource's slots, each with capacity units.
func inventoryRows(resourceID uint64, capacity int, slots []booking.Slot) []models.SlotInventory {
	rows := make([]models.SlotInventory, len(slots))
	for i, sl := range slots {
		rows[i] = models.SlotInventory{ResourceID: resourceID, Start: sl.Start.UTC(), End: sl.End.UTC(), Day: sl.Day, Capacity: capacity}
	}
	return rows
}

// SetSchedule replaces a resource's schedule and its inventory from FromDay on, moves bookings' slot
// fields onto the new grid and counts their units on the new slots' ledger, refusing the change
// (*CapacityError) when a slot that has not started would hold more than its capacity. It answers
// the days whose inventory was replaced.
func (s *Catalog) SetSchedule(ctx context.Context, ch ScheduleChange) ([]string, error) {
	var oldDays []string
	rid := ch.ResourceID
	sched := scheduleRow(rid, ch.Schedule, ch.GeneratedUntil, ch.Now)
	err := s.db.Tx(ctx, "set schedule", func(tx *gorm.DB) error {
		if err := tx.Model(&models.SlotInventory{}).Where("resource_id = ? AND day >= ?", rid, ch.FromDay).
			Distinct().Pluck("day", &oldDays).Error; err != nil {
			return err
		}
		if err := tx.Where("resource_id = ? AND day >= ?", rid, ch.FromDay).Delete(&models.SlotInventory{}).Error; err != nil {
			return err
		}
		if err := tx.Clauses(clause.OnConflict{UpdateAll: true}).Create(&sched).Error; err != nil {
			return err
		}
		// The resource's capacity is the new slots' (a capacity change rebuilds them on the same rules).
		if err := tx.Model(&models.Resource{}).Where("id = ?", rid).
			Updates(map[string]any{"capacity": ch.Capacity, "updated_at": ch.Now}).Error; err != nil {
			return err
		}
		for id, fields := range ch.Moves {
			if err := tx.Model(&models.Booking{}).Where("id = ?", id).Update("slots", strings.Join(fields, ",")).Error; err != nil {
				return err
			}
		}
		if err := insertInventory(tx, inventoryRows(rid, ch.Capacity, ch.Slots)); err != nil {
			return err
		}
		// The new rows start at zero: the ledger is counted again from the bookings now on them.
		rep, err := s.ledger.checkResource(tx, rid, time.Time{})
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

// ExtendInventory adds a resource's slots, each with capacity units, to its inventory and moves the
// schedule's generated_until, in one transaction.
func (s *Catalog) ExtendInventory(ctx context.Context, resourceID uint64, capacity int, slots []booking.Slot, until string) error {
	return s.db.Tx(ctx, "extend inventory", func(tx *gorm.DB) error {
		if err := insertInventory(tx, inventoryRows(resourceID, capacity, slots)); err != nil {
			return err
		}
		return tx.Model(&models.Schedule{}).Where("resource_id = ?", resourceID).Update("generated_until", until).Error
	})
}

// InsertInventory adds a resource's slots, each with capacity units, to its inventory (existing
// ones are kept).
func (s *Catalog) InsertInventory(ctx context.Context, resourceID uint64, capacity int, slots []booking.Slot) error {
	return sqldb.MapErr("insert inventory", insertInventory(s.db.WithContext(ctx), inventoryRows(resourceID, capacity, slots)))
}

// Inventory reads one resource-day's slots, by start.
func (s *Catalog) Inventory(ctx context.Context, resourceID uint64, day string) ([]models.SlotInventory, error) {
	var rows []models.SlotInventory
	return rows, sqldb.MapErr("read inventory", s.db.WithContext(ctx).Where("resource_id = ? AND day = ?", resourceID, day).
		Order("start").Find(&rows).Error)
}

// NewService is what a new service is made of.
type NewService struct {
	VenueID                                      uint64
	Name                                         string
	DurationMinutes, PrepMinutes, CleanupMinutes int
	PriceCents                                   int64
	Links                                        []ServiceLink // the resources that can deliver it, in order
}

// ServiceLink is one resource of a service: its role (empty for a service of one resource at a
// time) and the role's place in the service's order.
type ServiceLink struct {
	ResourceID uint64
	Role       string
	Position   int
}

// CreateService inserts a service created at at with the resources that can deliver it (with their
// roles, for a service that needs several at once), and answers its rows.
func (s *Catalog) CreateService(ctx context.Context, in NewService, at time.Time) (models.Service, []models.ServiceResource, error) {
	svc := models.Service{VenueID: in.VenueID, Name: in.Name, DurationMinutes: in.DurationMinutes, PrepMinutes: in.PrepMinutes,
		CleanupMinutes: in.CleanupMinutes, PriceCents: in.PriceCents, Status: models.ResourceActive, CreatedAt: at}
	var links []models.ServiceResource
	err := s.db.Tx(ctx, "create service", func(tx *gorm.DB) error {
		svc.ID = 0
		if err := tx.Create(&svc).Error; err != nil {
			return err
		}
		links = make([]models.ServiceResource, len(in.Links))
		for i, l := range in.Links {
			links[i] = models.ServiceResource{ServiceID: svc.ID, ResourceID: l.ResourceID, Role: l.Role, Position: l.Position}
		}
		return tx.Create(&links).Error
	})
	return svc, links, err
}

// Services lists services by id, of one venue when venueID != 0, with their resources in order.
func (s *Catalog) Services(ctx context.Context, venueID uint64) ([]models.Service, map[uint64][]models.ServiceResource, error) {
	q := s.catalogDB(ctx).Order("id")
	if venueID != 0 {
		q = q.Where("venue_id = ?", venueID)
	}
	var rows []models.Service
	if err := q.Find(&rows).Error; err != nil {
		return nil, nil, sqldb.MapErr("list services", err)
	}
	var links []models.ServiceResource
	if err := s.db.WithContext(ctx).Order("service_id, position, resource_id").Find(&links).Error; err != nil {
		return nil, nil, sqldb.MapErr("list services", err)
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
		return svc, nil, sqldb.MapErr("read service", err)
	}
	var links []models.ServiceResource
	err := s.db.WithContext(ctx).Where("service_id = ?", id).Order("position, resource_id").Find(&links).Error
	return svc, links, sqldb.MapErr("read service", err)
}

// SetGrace inserts or replaces a category's grace policy, as of at.
func (s *Catalog) SetGrace(ctx context.Context, in booking.GraceInput, at time.Time) error {
	peak := in.Peak
	if peak == nil {
		peak = []booking.PeakRule{}
	}
	g := models.GracePolicy{Category: in.Category, GraceSeconds: in.GraceSeconds, Peak: jsonText(peak), UpdatedAt: at}
	return sqldb.MapErr("set grace policy", s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&g).Error)
}

// Graces lists every grace policy.
func (s *Catalog) Graces(ctx context.Context) ([]models.GracePolicy, error) {
	var rows []models.GracePolicy
	return rows, sqldb.MapErr("list grace policies", s.db.WithContext(ctx).Order("category").Find(&rows).Error)
}

// Policy reads a resource's booking rules; false when it has none (the defaults apply).
func (s *Catalog) Policy(ctx context.Context, resourceID uint64) (models.ResourcePolicy, bool, error) {
	var rows []models.ResourcePolicy
	err := s.db.WithContext(ctx).Where("resource_id = ?", resourceID).Limit(1).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return models.ResourcePolicy{}, false, sqldb.MapErr("read policy", err)
	}
	return rows[0], true, nil
}

// Policies reads the booking rules of resources that have some.
func (s *Catalog) Policies(ctx context.Context, resourceIDs []uint64) ([]models.ResourcePolicy, error) {
	var rows []models.ResourcePolicy
	return rows, sqldb.MapErr("read policies", s.catalogDB(ctx).Where("resource_id IN ?", resourceIDs).Find(&rows).Error)
}

// PolicyOf reads a resource's booking rules from their row.
func PolicyOf(r models.ResourcePolicy) booking.Policy {
	return booking.Policy{MinNotice: minutes(r.MinNoticeMinutes), MaxDaysAhead: r.MaxDaysAhead,
		CancelCutoff: minutes(r.CancelCutoffMinutes), CancelRefund: r.CancelRefundPercent,
		LateCancelRefund: r.LateCancelRefundPercent, NoshowRefund: r.NoshowRefundPercent,
		RescheduleCutoff: minutes(r.RescheduleCutoffMinutes), MaxReschedules: r.MaxReschedules,
		RequiresApproval: r.RequiresApproval, ApprovalWindow: minutes(r.ApprovalWindowMinutes)}
}

func minutes(n int) time.Duration { return time.Duration(n) * time.Minute }

// policyRow is the row of a resource's booking rules set at at.
func policyRow(resourceID uint64, p booking.Policy, at time.Time) models.ResourcePolicy {
	return models.ResourcePolicy{ResourceID: resourceID, MinNoticeMinutes: int(p.MinNotice / time.Minute),
		MaxDaysAhead: p.MaxDaysAhead, CancelCutoffMinutes: int(p.CancelCutoff / time.Minute),
		CancelRefundPercent: p.CancelRefund, LateCancelRefundPercent: p.LateCancelRefund,
		NoshowRefundPercent: p.NoshowRefund, RescheduleCutoffMinutes: int(p.RescheduleCutoff / time.Minute),
		MaxReschedules: p.MaxReschedules, RequiresApproval: p.RequiresApproval,
		ApprovalWindowMinutes: int(p.ApprovalWindow / time.Minute), UpdatedAt: at}
}

// UpdatePolicy reads a resource's booking rules (booking.DefaultPolicy when it has none), lets
// decide change them, and stores the result as of at. An error of decide writes nothing and is
// answered as it is. Like the write it replaces, it is not a transaction: of two changes at once,
// the last one written wins.
func (s *Catalog) UpdatePolicy(ctx context.Context, resourceID uint64, at time.Time, decide func(p *booking.Policy) error) (booking.Policy, error) {
	p := booking.DefaultPolicy()
	row, ok, err := s.Policy(ctx, resourceID)
	if err != nil {
		return p, err
	}
	if ok {
		p = PolicyOf(row)
	}
	if err := decide(&p); err != nil {
		return p, err
	}
	row = policyRow(resourceID, p, at)
	return p, sqldb.MapErr("set policy", s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&row).Error)
}

// NoshowPolicy reads the no-show freeze rule; false while it is off.
func (s *Catalog) NoshowPolicy(ctx context.Context) (models.NoshowPolicy, bool, error) {
	var rows []models.NoshowPolicy
	err := s.db.WithContext(ctx).Where("id = 1").Limit(1).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return models.NoshowPolicy{}, false, sqldb.MapErr("read no-show policy", err)
	}
	return rows[0], true, nil
}

// SetNoshowPolicy stores the no-show freeze rule, as of at.
func (s *Catalog) SetNoshowPolicy(ctx context.Context, in booking.NoshowPolicyInput, at time.Time) error {
	p := models.NoshowPolicy{ID: 1, MaxNoshows: in.MaxNoshows, WithinDays: in.WithinDays, FreezeDays: in.FreezeDays, UpdatedAt: at}
	return sqldb.MapErr("set no-show policy", s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&p).Error)
}

// jsonText is v as the JSON a text column holds (only plain structs and slices are stored so).
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
