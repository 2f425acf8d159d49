package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/slotwheel/slotwheel/models"
)

// cacheTTL bounds how stale another instance's view of an admin change can be; this instance
// invalidates its own cache on every change it makes.
const cacheTTL = 5 * time.Second

type venueInfo struct {
	venue  models.Venue
	loc    *time.Location
	loaded time.Time
}

type resourceInfo struct {
	res    models.Resource
	venue  *venueInfo
	plan   *plan // nil until a schedule is set
	loaded time.Time
}

type serviceInfo struct {
	svc       models.Service
	resources []uint64
	loaded    time.Time
}

type gracePolicy struct {
	grace time.Duration
	peak  []peakWindow
}

type peakWindow struct {
	days     map[int]bool
	from, to clockTime
	grace    time.Duration
}

func requireAdmin(a Actor) error {
	if a.Role != RoleAdmin {
		return ErrForbidden
	}
	return nil
}

func checkName(field, s string, max int) error {
	if strings.TrimSpace(s) == "" {
		return Invalid("missing_"+field, "%s is required", field)
	}
	if utf8.RuneCountInString(s) > max {
		return Invalid("invalid_"+field, "%s is longer than %d characters", field, max)
	}
	if !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return Invalid("invalid_"+field, "%s has control characters or invalid UTF-8", field)
	}
	return nil
}

// CreateVenue adds a venue. Admin only.
func (e *Engine) CreateVenue(ctx context.Context, a Actor, in VenueInput) (Venue, error) {
	if err := requireAdmin(a); err != nil {
		return Venue{}, err
	}
	if err := checkName("name", in.Name, 200); err != nil {
		return Venue{}, err
	}
	if _, err := loadLocation(in.Timezone); err != nil {
		return Venue{}, err
	}
	v := models.Venue{Name: in.Name, Timezone: in.Timezone, CreatedAt: e.clock.Now()}
	if err := e.db.WithContext(ctx).Create(&v).Error; err != nil {
		return Venue{}, backendErr("create venue", err)
	}
	e.cacheMu.Lock()
	e.venueList = nil
	e.cacheMu.Unlock()
	return toVenue(v), nil
}

func loadLocation(tz string) (*time.Location, error) {
	if tz == "" || tz == "Local" {
		return nil, Invalid("invalid_timezone", "timezone must be an IANA name such as Asia/Shanghai")
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, Invalid("invalid_timezone", "%q is not an IANA time zone", tz)
	}
	return loc, nil
}

// toVenue converts a row; its times are answered in the venue's own offset, like everything else.
func toVenue(v models.Venue) Venue {
	created := v.CreatedAt
	if loc, err := time.LoadLocation(v.Timezone); err == nil {
		created = created.In(loc)
	}
	return Venue{ID: v.ID, Name: v.Name, Timezone: v.Timezone, CreatedAt: created}
}

// ListVenues lists every venue. Anyone.
func (e *Engine) ListVenues(ctx context.Context) ([]Venue, error) {
	var rows []models.Venue
	if err := e.db.WithContext(ctx).Order("id").Find(&rows).Error; err != nil {
		return nil, backendErr("list venues", err)
	}
	out := make([]Venue, len(rows))
	for i, v := range rows {
		out[i] = toVenue(v)
	}
	return out, nil
}

func (e *Engine) venue(ctx context.Context, id uint64) (*venueInfo, error) {
	now := e.clock.Now()
	e.cacheMu.RLock()
	vi := e.venues[id]
	e.cacheMu.RUnlock()
	if vi != nil && now.Sub(vi.loaded) < cacheTTL && now.Sub(vi.loaded) >= 0 {
		return vi, nil
	}
	var v models.Venue
	if err := e.db.WithContext(ctx).First(&v, id).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, ErrNotFound
		}
		return nil, backendErr("load venue", err)
	}
	loc, err := time.LoadLocation(v.Timezone)
	if err != nil {
		return nil, fmt.Errorf("venue %d has a bad time zone %q: %w", id, v.Timezone, err)
	}
	vi = &venueInfo{venue: v, loc: loc, loaded: now}
	e.cacheMu.Lock()
	e.venues[id] = vi
	e.cacheMu.Unlock()
	return vi, nil
}

// CreateResource adds a resource to a venue. Admin only.
func (e *Engine) CreateResource(ctx context.Context, a Actor, in ResourceInput) (Resource, error) {
	if err := requireAdmin(a); err != nil {
		return Resource{}, err
	}
	if err := checkName("name", in.Name, 200); err != nil {
		return Resource{}, err
	}
	if err := checkName("kind", in.Kind, 64); err != nil {
		return Resource{}, err
	}
	if utf8.RuneCountInString(in.Category) > 64 {
		return Resource{}, Invalid("invalid_category", "category is longer than 64 characters")
	}
	if in.Capacity < 1 || in.Capacity > 1000000 {
		return Resource{}, Invalid("invalid_capacity", "capacity must be between 1 and 1000000, not %d", in.Capacity)
	}
	if in.PriceCents < 0 || in.PriceCents > 1e12 {
		return Resource{}, Invalid("invalid_price", "price_cents must be between 0 and 10^12")
	}
	if _, err := e.venue(ctx, in.VenueID); err != nil {
		if errors.Is(err, ErrNotFound) {
			return Resource{}, Invalid("unknown_venue", "venue %d does not exist", in.VenueID)
		}
		return Resource{}, err
	}
	now := e.clock.Now()
	r := models.Resource{VenueID: in.VenueID, Name: in.Name, Kind: in.Kind, Capacity: in.Capacity,
		Category: in.Category, PriceCents: in.PriceCents, Status: models.ResourceActive, CreatedAt: now, UpdatedAt: now}
	if err := e.db.WithContext(ctx).Create(&r).Error; err != nil {
		return Resource{}, backendErr("create resource", err)
	}
	out := toResource(r, nil)
	if vi, err := e.venue(ctx, r.VenueID); err == nil {
		out.CreatedAt = out.CreatedAt.In(vi.loc)
	}
	return out, nil
}

func toResource(r models.Resource, p *plan) Resource {
	out := Resource{ID: r.ID, VenueID: r.VenueID, Name: r.Name, Kind: r.Kind, Capacity: r.Capacity,
		Category: r.Category, PriceCents: r.PriceCents, Status: r.Status, CreatedAt: r.CreatedAt}
	if p != nil {
		out.SlotMinutes = p.slotMinutes
	}
	return out
}

// ListResources lists resources, of one venue when venueID != 0. Anyone.
func (e *Engine) ListResources(ctx context.Context, venueID uint64) ([]Resource, error) {
	q := e.db.WithContext(ctx).Order("id")
	if venueID != 0 {
		q = q.Where("venue_id = ?", venueID)
	}
	var rows []models.Resource
	if err := q.Find(&rows).Error; err != nil {
		return nil, backendErr("list resources", err)
	}
	var scheds []models.Schedule
	if err := e.db.WithContext(ctx).Find(&scheds).Error; err != nil {
		return nil, backendErr("list schedules", err)
	}
	slotMinutes := map[uint64]int{}
	for _, s := range scheds {
		slotMinutes[s.ResourceID] = s.SlotMinutes
	}
	out := make([]Resource, len(rows))
	for i, r := range rows {
		out[i] = toResource(r, nil)
		out[i].SlotMinutes = slotMinutes[r.ID]
		if vi, err := e.venue(ctx, r.VenueID); err == nil {
			out[i].CreatedAt = out[i].CreatedAt.In(vi.loc)
		}
	}
	return out, nil
}

func (e *Engine) resource(ctx context.Context, id uint64) (*resourceInfo, error) {
	now := e.clock.Now()
	e.cacheMu.RLock()
	ri := e.cache[id]
	e.cacheMu.RUnlock()
	if ri != nil && now.Sub(ri.loaded) < cacheTTL && now.Sub(ri.loaded) >= 0 {
		return ri, nil
	}
	var r models.Resource
	if err := e.db.WithContext(ctx).First(&r, id).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, ErrNotFound
		}
		return nil, backendErr("load resource", err)
	}
	vi, err := e.venue(ctx, r.VenueID)
	if err != nil {
		return nil, err
	}
	ri = &resourceInfo{res: r, venue: vi, loaded: now}
	var s models.Schedule
	err = e.db.WithContext(ctx).First(&s, "resource_id = ?", id).Error
	switch {
	case err == nil:
		p, perr := planFromRow(s)
		if perr != nil {
			return nil, fmt.Errorf("resource %d has a bad stored schedule: %w", id, perr)
		}
		ri.plan = p
	case !errors.Is(err, gorm.ErrRecordNotFound):
		return nil, backendErr("load schedule", err)
	}
	e.cacheMu.Lock()
	e.cache[id] = ri
	e.cacheMu.Unlock()
	return ri, nil
}

func (e *Engine) forgetResource(id uint64) {
	e.cacheMu.Lock()
	delete(e.cache, id)
	e.cacheMu.Unlock()
}

func planFromRow(s models.Schedule) (*plan, error) {
	in := ScheduleInput{SlotMinutes: s.SlotMinutes, HorizonDays: s.HorizonDays}
	if err := json.Unmarshal([]byte(s.Weekly), &in.Weekly); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(s.Exceptions), &in.Exceptions); err != nil {
		return nil, err
	}
	return buildPlan(in)
}

// SetSchedule replaces a resource's opening rules and regenerates its inventory from today on.
// Units already taken stay with their holds and bookings. Admin only.
func (e *Engine) SetSchedule(ctx context.Context, a Actor, resourceID uint64, in ScheduleInput) (Schedule, error) {
	if err := requireAdmin(a); err != nil {
		return Schedule{}, err
	}
	p, err := buildPlan(in)
	if err != nil {
		return Schedule{}, err
	}
	ri, err := e.resource(ctx, resourceID)
	if err != nil {
		return Schedule{}, err
	}
	if in.Weekly == nil {
		in.Weekly = []WeeklyRule{}
	}
	if in.Exceptions == nil {
		in.Exceptions = []ScheduleException{}
	}
	now := e.clock.Now()
	loc := ri.venue.loc
	today := localDay(now, loc)
	occupants, err := e.regrid(ctx, ri, p)
	if err != nil {
		return Schedule{}, err
	}
	row := models.Schedule{ResourceID: resourceID, SlotMinutes: in.SlotMinutes, Weekly: encodeJSON(in.Weekly),
		Exceptions: encodeJSON(in.Exceptions), HorizonDays: in.HorizonDays,
		GeneratedUntil: today.AddDate(0, 0, in.HorizonDays).Format(dayLayout), UpdatedAt: now}
	var oldDays []string
	err = e.tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Model(&models.SlotInventory{}).Where("resource_id = ? AND day >= ?", resourceID, today.Format(dayLayout)).
			Distinct().Pluck("day", &oldDays).Error; err != nil {
			return err
		}
		if err := tx.Where("resource_id = ? AND day >= ?", resourceID, today.Format(dayLayout)).Delete(&models.SlotInventory{}).Error; err != nil {
			return err
		}
		if err := tx.Clauses(clause.OnConflict{UpdateAll: true}).Create(&row).Error; err != nil {
			return err
		}
		for _, o := range occupants {
			if o.bookingID == 0 || !o.changed {
				continue
			}
			if err := tx.Model(&models.Booking{}).Where("id = ?", o.bookingID).Update("slots", o.slots).Error; err != nil {
				return err
			}
		}
		return insertInventory(tx, ri.res, p, loc, today, in.HorizonDays)
	})
	if err != nil {
		return Schedule{}, backendErr("set schedule", err)
	}
	e.forgetResource(resourceID)
	// Forget the regenerated days in Redis so they reload with the new grid, and move the units of
	// bookings and live holds onto it.
	if err := e.applyRegrid(ctx, ri, oldDays, occupants); err != nil {
		return Schedule{}, err
	}
	return Schedule{ResourceID: resourceID, SlotMinutes: in.SlotMinutes, Weekly: in.Weekly, Exceptions: in.Exceptions,
		HorizonDays: in.HorizonDays, GeneratedUntil: row.GeneratedUntil}, nil
}

// insertInventory writes the slots of days [from, from+n).
func insertInventory(tx *gorm.DB, r models.Resource, p *plan, loc *time.Location, from time.Time, n int) error {
	var rows []models.SlotInventory
	for i := 0; i < n; i++ {
		for _, s := range p.daySlots(from.AddDate(0, 0, i), loc) {
			rows = append(rows, models.SlotInventory{ResourceID: r.ID, Start: s.start, End: s.end, Day: s.day, Capacity: r.Capacity})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	return tx.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(rows, 500).Error
}

// extendInventory keeps every schedule's inventory generated horizon_days ahead (run by
// reconciliation, so a day comes into sale without anyone touching the schedule).
func (e *Engine) extendInventory(ctx context.Context) (int, error) {
	var scheds []models.Schedule
	if err := e.db.WithContext(ctx).Find(&scheds).Error; err != nil {
		return 0, err
	}
	days := 0
	for _, s := range scheds {
		ri, err := e.resource(ctx, s.ResourceID)
		if err != nil || ri.plan == nil {
			continue
		}
		loc := ri.venue.loc
		today := localDay(e.clock.Now(), loc)
		want := today.AddDate(0, 0, s.HorizonDays)
		from, err := time.ParseInLocation(dayLayout, s.GeneratedUntil, loc)
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
		err = e.tx(ctx, func(tx *gorm.DB) error {
			if err := insertInventory(tx, ri.res, ri.plan, loc, from, n); err != nil {
				return err
			}
			return tx.Model(&models.Schedule{}).Where("resource_id = ?", s.ResourceID).
				Update("generated_until", want.Format(dayLayout)).Error
		})
		if err != nil {
			return days, err
		}
		days += n
	}
	return days, nil
}

// CreateService adds a service deliverable on some resources of one venue. Admin only.
func (e *Engine) CreateService(ctx context.Context, a Actor, in ServiceInput) (Service, error) {
	if err := requireAdmin(a); err != nil {
		return Service{}, err
	}
	if err := checkName("name", in.Name, 200); err != nil {
		return Service{}, err
	}
	if in.DurationMinutes < 1 || in.DurationMinutes > 1440 {
		return Service{}, Invalid("invalid_duration", "duration_minutes must be between 1 and 1440")
	}
	if in.PrepMinutes < 0 || in.PrepMinutes > 720 || in.CleanupMinutes < 0 || in.CleanupMinutes > 720 {
		return Service{}, Invalid("invalid_buffer", "prep_minutes and cleanup_minutes must be between 0 and 720")
	}
	if in.PriceCents < 0 || in.PriceCents > 1e12 {
		return Service{}, Invalid("invalid_price", "price_cents must be between 0 and 10^12")
	}
	if len(in.ResourceIDs) == 0 {
		return Service{}, Invalid("missing_resource_ids", "resource_ids must name at least one resource")
	}
	if _, err := e.venue(ctx, in.VenueID); err != nil {
		if errors.Is(err, ErrNotFound) {
			return Service{}, Invalid("unknown_venue", "venue %d does not exist", in.VenueID)
		}
		return Service{}, err
	}
	seen := map[uint64]bool{}
	for _, id := range in.ResourceIDs {
		ri, err := e.resource(ctx, id)
		if errors.Is(err, ErrNotFound) || (err == nil && ri.res.VenueID != in.VenueID) {
			return Service{}, Invalid("unknown_resource", "resource %d is not a resource of venue %d", id, in.VenueID)
		}
		if err != nil {
			return Service{}, err
		}
		if seen[id] {
			return Service{}, Invalid("duplicate_resource", "resource %d is listed twice", id)
		}
		seen[id] = true
	}
	s := models.Service{VenueID: in.VenueID, Name: in.Name, DurationMinutes: in.DurationMinutes, PrepMinutes: in.PrepMinutes,
		CleanupMinutes: in.CleanupMinutes, PriceCents: in.PriceCents, CreatedAt: e.clock.Now()}
	err := e.tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(&s).Error; err != nil {
			return err
		}
		links := make([]models.ServiceResource, len(in.ResourceIDs))
		for i, id := range in.ResourceIDs {
			links[i] = models.ServiceResource{ServiceID: s.ID, ResourceID: id}
		}
		return tx.Create(&links).Error
	})
	if err != nil {
		return Service{}, backendErr("create service", err)
	}
	return e.inVenueZone(ctx, toService(s, in.ResourceIDs)), nil
}

func toService(s models.Service, resources []uint64) Service {
	return Service{ID: s.ID, VenueID: s.VenueID, Name: s.Name, DurationMinutes: s.DurationMinutes, PrepMinutes: s.PrepMinutes,
		CleanupMinutes: s.CleanupMinutes, ResourceIDs: resources, PriceCents: s.PriceCents, CreatedAt: s.CreatedAt}
}

func (e *Engine) inVenueZone(ctx context.Context, s Service) Service {
	if vi, err := e.venue(ctx, s.VenueID); err == nil {
		s.CreatedAt = s.CreatedAt.In(vi.loc)
	}
	return s
}

// ListServices lists services, of one venue when venueID != 0. Anyone.
func (e *Engine) ListServices(ctx context.Context, venueID uint64) ([]Service, error) {
	q := e.db.WithContext(ctx).Order("id")
	if venueID != 0 {
		q = q.Where("venue_id = ?", venueID)
	}
	var rows []models.Service
	if err := q.Find(&rows).Error; err != nil {
		return nil, backendErr("list services", err)
	}
	var links []models.ServiceResource
	if err := e.db.WithContext(ctx).Order("service_id, resource_id").Find(&links).Error; err != nil {
		return nil, backendErr("list services", err)
	}
	byService := map[uint64][]uint64{}
	for _, l := range links {
		byService[l.ServiceID] = append(byService[l.ServiceID], l.ResourceID)
	}
	out := make([]Service, len(rows))
	for i, s := range rows {
		out[i] = e.inVenueZone(ctx, toService(s, byService[s.ID]))
	}
	return out, nil
}

func (e *Engine) service(ctx context.Context, id uint64) (*serviceInfo, error) {
	now := e.clock.Now()
	e.cacheMu.RLock()
	si := e.svc[id]
	e.cacheMu.RUnlock()
	if si != nil && now.Sub(si.loaded) < cacheTTL && now.Sub(si.loaded) >= 0 {
		return si, nil
	}
	var s models.Service
	if err := e.db.WithContext(ctx).First(&s, id).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, ErrNotFound
		}
		return nil, backendErr("load service", err)
	}
	var ids []uint64
	if err := e.db.WithContext(ctx).Model(&models.ServiceResource{}).Where("service_id = ?", id).Order("resource_id").
		Pluck("resource_id", &ids).Error; err != nil {
		return nil, backendErr("load service", err)
	}
	si = &serviceInfo{svc: s, resources: ids, loaded: now}
	e.cacheMu.Lock()
	e.svc[id] = si
	e.cacheMu.Unlock()
	return si, nil
}

// SetGracePolicy sets the grace of a resource category. Admin only.
func (e *Engine) SetGracePolicy(ctx context.Context, a Actor, in GracePolicy) (GracePolicy, error) {
	if err := requireAdmin(a); err != nil {
		return GracePolicy{}, err
	}
	if utf8.RuneCountInString(in.Category) > 64 {
		return GracePolicy{}, Invalid("invalid_category", "category is longer than 64 characters")
	}
	if _, err := parseGrace(in); err != nil {
		return GracePolicy{}, err
	}
	if in.Peak == nil {
		in.Peak = []PeakRule{}
	}
	row := models.GracePolicy{Category: in.Category, GraceSeconds: in.GraceSeconds, Peak: encodeJSON(in.Peak), UpdatedAt: e.clock.Now()}
	if err := e.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&row).Error; err != nil {
		return GracePolicy{}, backendErr("set grace policy", err)
	}
	e.cacheMu.Lock()
	e.grace = nil
	e.cacheMu.Unlock()
	return in, nil
}

const maxGraceSeconds = 24 * 3600

func parseGrace(in GracePolicy) (*gracePolicy, error) {
	if in.GraceSeconds < 0 || in.GraceSeconds > maxGraceSeconds {
		return nil, Invalid("invalid_grace", "grace_seconds must be between 0 and %d", maxGraceSeconds)
	}
	gp := &gracePolicy{grace: time.Duration(in.GraceSeconds) * time.Second}
	for i, p := range in.Peak {
		field := fmt.Sprintf("peak[%d]", i)
		if err := validateWeekdays(field+".weekdays", p.Weekdays); err != nil {
			return nil, err
		}
		iv, err := parseInterval(field, p.From, p.To)
		if err != nil {
			return nil, err
		}
		if p.GraceSeconds < 0 || p.GraceSeconds > maxGraceSeconds {
			return nil, Invalid("invalid_grace", "%s.grace_seconds must be between 0 and %d", field, maxGraceSeconds)
		}
		w := peakWindow{days: map[int]bool{}, from: iv.open, to: iv.close, grace: time.Duration(p.GraceSeconds) * time.Second}
		for _, d := range p.Weekdays {
			w.days[d] = true
		}
		gp.peak = append(gp.peak, w)
	}
	return gp, nil
}

// graceFor is the grace of a booking of a resource of category starting at start: the first peak
// window containing the venue-local start, else the category's grace, else the default.
func (e *Engine) graceFor(ctx context.Context, category string, start time.Time, loc *time.Location) (time.Duration, error) {
	now := e.clock.Now()
	e.cacheMu.RLock()
	policies, at := e.grace, e.graceAt
	e.cacheMu.RUnlock()
	if policies == nil || now.Sub(at) >= cacheTTL || now.Sub(at) < 0 {
		var rows []models.GracePolicy
		if err := e.db.WithContext(ctx).Find(&rows).Error; err != nil {
			return 0, backendErr("load grace policies", err)
		}
		policies = map[string]*gracePolicy{}
		for _, r := range rows {
			in := GracePolicy{Category: r.Category, GraceSeconds: r.GraceSeconds}
			if err := json.Unmarshal([]byte(r.Peak), &in.Peak); err != nil {
				return 0, fmt.Errorf("grace policy %q: %w", r.Category, err)
			}
			gp, err := parseGrace(in)
			if err != nil {
				return 0, fmt.Errorf("grace policy %q: %w", r.Category, err)
			}
			policies[r.Category] = gp
		}
		e.cacheMu.Lock()
		e.grace, e.graceAt = policies, now
		e.cacheMu.Unlock()
	}
	gp := policies[category]
	if gp == nil {
		return e.opts.DefaultGrace, nil
	}
	local := start.In(loc)
	minute := clockTime(local.Hour()*60 + local.Minute())
	for _, w := range gp.peak {
		if w.days[isoWeekday(local)] && minute >= w.from && minute < w.to {
			return w.grace, nil
		}
	}
	return gp.grace, nil
}

// venueIDs lists every venue id, cached like the rest of the catalog: the wheel ticks over it ten
// times a second.
func (e *Engine) venueIDs(ctx context.Context) ([]uint64, error) {
	now := e.clock.Now()
	e.cacheMu.RLock()
	ids, at := e.venueList, e.venueListAt
	e.cacheMu.RUnlock()
	if ids != nil && now.Sub(at) < cacheTTL && now.Sub(at) >= 0 {
		return ids, nil
	}
	ids = []uint64{}
	if err := e.db.WithContext(ctx).Model(&models.Venue{}).Order("id").Pluck("id", &ids).Error; err != nil {
		return nil, backendErr("list venues", err)
	}
	e.cacheMu.Lock()
	e.venueList, e.venueListAt = ids, now
	e.cacheMu.Unlock()
	return ids, nil
}
