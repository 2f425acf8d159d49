package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/catalog"
	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
	"github.com/slotwheel/slotwheel/models"
)

// Catalog owns venues (their release mode too), resources, services, schedules and policies, and
// loading a day's inventory into Redis (catalog.go, schedule.go, availability.go, policy.go).
type Catalog struct {
	ss    *sqlstore.Store
	cat   *catalog.Cache
	rs    *redisstore.Store
	clock clock.Clock
	log   *slog.Logger

	defaultGrace time.Duration       // Options.DefaultGrace
	defaultMode  booking.ReleaseMode // Options.ReleaseMode: of venues that set none

	// What the catalog uses of the other services.
	bookings interface { // a schedule, capacity or status change cancels the bookings it strands
		VenueCancel(ctx context.Context, a booking.Actor, id uint64, d Decision) (booking.Booking, error)
	}
	holds interface {
		readHold(ctx context.Context, id string) (*redisstore.HoldRecord, error)
		refreshFreezes(ctx context.Context, users []string) error
	}
}

// Venue is a place with an IANA time zone.
type Venue struct {
	ID          uint64
	Name        string
	Timezone    string
	ReleaseMode string // on, off or dry_run
	CreatedAt   time.Time
}

// VenueInput creates a venue.
type VenueInput struct {
	Name     string
	Timezone string
}

// Resource is something sold by the slot.
type Resource struct {
	ID          uint64
	VenueID     uint64
	Name        string
	Kind        string
	Capacity    int
	Category    string
	PriceCents  int64
	Status      string
	SlotMinutes int // 0 until a schedule is set
	CreatedAt   time.Time
}

// ResourceInput creates a resource.
type ResourceInput struct {
	VenueID    uint64
	Name       string
	Kind       string
	Capacity   int
	Category   string
	PriceCents int64
}

// Service is what a customer books on one of several resources.
type Service struct {
	ID              uint64
	VenueID         uint64
	Name            string
	DurationMinutes int
	PrepMinutes     int
	CleanupMinutes  int
	ResourceIDs     []uint64      // every resource that delivers it
	Roles           []ServiceRole // a service that needs several resources at once; nil otherwise
	PriceCents      int64
	Status          string // active or disabled (not sold)
	CreatedAt       time.Time
}

// ServiceRole is one role of a service that needs several resources at once (a counsellor and a
// room): a hold takes one of its resources.
type ServiceRole struct {
	Role        string
	ResourceIDs []uint64
}

// ServiceInput creates a service.
type ServiceInput struct {
	VenueID         uint64
	Name            string
	DurationMinutes int
	PrepMinutes     int
	CleanupMinutes  int
	ResourceIDs     []uint64      // any one of them delivers it, or
	Roles           []ServiceRole // one of every role's
	PriceCents      int64
}

// graceFor is the grace of a booking of ri starting at start.
func (cg *Catalog) graceFor(ctx context.Context, ri *catalog.ResourceInfo, start time.Time) (time.Duration, error) {
	policies, err := cg.cat.Grace(ctx)
	if err != nil {
		return 0, err
	}
	return booking.GraceFor(policies, ri.Resource.Category, cg.defaultGrace, start, ri.Venue.Loc), nil
}

// CreateVenue adds a venue. Admin only.
func (cg *Catalog) CreateVenue(ctx context.Context, a booking.Actor, in VenueInput) (Venue, error) {
	if err := a.RequireAdmin(); err != nil {
		return Venue{}, err
	}
	if err := booking.CheckName("name", in.Name, booking.MaxNameLen); err != nil {
		return Venue{}, err
	}
	if _, err := loadLocation(in.Timezone); err != nil {
		return Venue{}, err
	}
	v, err := cg.ss.CreateVenue(ctx, in.Name, in.Timezone, cg.clock.Now())
	if err != nil {
		return Venue{}, err
	}
	if err := cg.cat.ChangedVenueList(ctx); err != nil {
		return Venue{}, err
	}
	return cg.toVenue(v), nil
}

func loadLocation(tz string) (*time.Location, error) {
	bad := booking.Invalid("invalid_timezone", "timezone must be an IANA name such as Asia/Shanghai").WithField("timezone")
	if tz == "" || tz == "Local" || len(tz) > booking.MaxTimezoneLen {
		return nil, bad
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, bad
	}
	return loc, nil
}

// toVenue converts a row; its times are answered in the venue's own offset, like everything else.
func (cg *Catalog) toVenue(v models.Venue) Venue {
	created := v.CreatedAt
	if loc, err := time.LoadLocation(v.Timezone); err == nil {
		created = created.In(loc)
	}
	mode := v.ReleaseMode
	if mode == "" {
		mode = string(cg.defaultMode)
	}
	return Venue{ID: v.ID, Name: v.Name, Timezone: v.Timezone, ReleaseMode: mode, CreatedAt: created}
}

// ListVenues lists every venue. Anyone.
func (cg *Catalog) ListVenues(ctx context.Context) ([]Venue, error) {
	rows, err := cg.ss.Venues(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Venue, len(rows))
	for i, v := range rows {
		out[i] = cg.toVenue(v)
	}
	return out, nil
}

// CreateResource adds a resource to a venue. The venue's manager or an admin.
func (cg *Catalog) CreateResource(ctx context.Context, a booking.Actor, in ResourceInput) (Resource, error) {
	if err := a.RequireManager(in.VenueID); err != nil {
		return Resource{}, err
	}
	if err := firstOf(
		booking.CheckName("name", in.Name, booking.MaxNameLen),
		booking.CheckName("kind", in.Kind, booking.MaxTagLen),
		booking.CheckOptionalText("category", in.Category, booking.MaxTagLen),
		booking.CheckRange(booking.FieldCapacity, int64(in.Capacity)),
		booking.CheckRange(booking.FieldPriceCents, in.PriceCents),
	); err != nil {
		return Resource{}, err
	}
	vi, err := cg.cat.Venue(ctx, in.VenueID)
	if err != nil {
		return Resource{}, booking.Unknown(err, "unknown_venue", "venue %d does not exist", in.VenueID)
	}
	r, err := cg.ss.CreateResource(ctx, sqlstore.NewResource{VenueID: in.VenueID, Name: in.Name, Kind: in.Kind,
		Capacity: in.Capacity, Category: in.Category, PriceCents: in.PriceCents}, cg.clock.Now())
	if err != nil {
		return Resource{}, err
	}
	out := toResource(r, 0)
	out.CreatedAt = out.CreatedAt.In(vi.Loc)
	return out, nil
}

// firstOf returns the first non-nil error (validation answers one problem at a time).
func firstOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func toResource(r models.Resource, slotMinutes int) Resource {
	return Resource{ID: r.ID, VenueID: r.VenueID, Name: r.Name, Kind: r.Kind, Capacity: r.Capacity,
		Category: r.Category, PriceCents: r.PriceCents, Status: r.Status, SlotMinutes: slotMinutes, CreatedAt: r.CreatedAt}
}

// ListResources lists resources, of one venue when venueID != 0. Anyone.
func (cg *Catalog) ListResources(ctx context.Context, venueID uint64) ([]Resource, error) {
	rows, err := cg.ss.Resources(ctx, venueID)
	if err != nil {
		return nil, err
	}
	scheds, err := cg.ss.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	slotMinutes := map[uint64]int{}
	for _, s := range scheds {
		slotMinutes[s.ResourceID] = s.SlotMinutes
	}
	out := make([]Resource, len(rows))
	for i, r := range rows {
		out[i] = toResource(r, slotMinutes[r.ID])
		if vi, err := cg.cat.Venue(ctx, r.VenueID); err == nil {
			out[i].CreatedAt = out[i].CreatedAt.In(vi.Loc)
		}
	}
	return out, nil
}

// CreateService adds a service deliverable on some resources of one venue — any one of ResourceIDs,
// or, for a service that needs several resources at once, one of every role's. The venue's manager
// or an admin.
func (cg *Catalog) CreateService(ctx context.Context, a booking.Actor, in ServiceInput) (Service, error) {
	if err := a.RequireManager(in.VenueID); err != nil {
		return Service{}, err
	}
	if err := firstOf(
		booking.CheckName("name", in.Name, booking.MaxNameLen),
		booking.CheckRange(booking.FieldDurationMinutes, int64(in.DurationMinutes)),
		booking.CheckRange(booking.FieldPrepMinutes, int64(in.PrepMinutes)),
		booking.CheckRange(booking.FieldCleanupMinutes, int64(in.CleanupMinutes)),
		booking.CheckRange(booking.FieldPriceCents, in.PriceCents),
	); err != nil {
		return Service{}, err
	}
	links, err := serviceLinks(in)
	if err != nil {
		return Service{}, err
	}
	vi, err := cg.cat.Venue(ctx, in.VenueID)
	if err != nil {
		return Service{}, booking.Unknown(err, "unknown_venue", "venue %d does not exist", in.VenueID)
	}
	for _, l := range links {
		ri, err := cg.cat.Resource(ctx, l.ResourceID)
		if err == nil && ri.Resource.VenueID != in.VenueID {
			err = booking.ErrNotFound
		}
		if err != nil {
			return Service{}, booking.Unknown(err, "unknown_resource", "resource %d is not a resource of venue %d", l.ResourceID, in.VenueID)
		}
		if ri.Plan != nil {
			if err := booking.CheckServiceDuration(in.DurationMinutes, ri.Plan.SlotMinutes()); err != nil {
				return Service{}, err
			}
		}
	}
	s, rows, err := cg.ss.CreateService(ctx, sqlstore.NewService{VenueID: in.VenueID, Name: in.Name,
		DurationMinutes: in.DurationMinutes, PrepMinutes: in.PrepMinutes, CleanupMinutes: in.CleanupMinutes,
		PriceCents: in.PriceCents, Links: links}, cg.clock.Now())
	if err != nil {
		return Service{}, err
	}
	out := toService(catalog.ServiceInfoOf(s, rows))
	out.CreatedAt = out.CreatedAt.In(vi.Loc)
	return out, nil
}

// serviceLinks checks a service's resources (or roles) and lists them in order: a resource at most
// once in the whole service, 1 to 100 of them, roles named and unique.
func serviceLinks(in ServiceInput) ([]sqlstore.ServiceLink, error) {
	var links []sqlstore.ServiceLink
	seen := map[uint64]bool{}
	add := func(field, role string, pos int, ids []uint64) error {
		for _, id := range ids {
			if seen[id] {
				return booking.Invalid("invalid_resource_ids", "resource %d is listed twice", id).WithField(field)
			}
			seen[id] = true
			links = append(links, sqlstore.ServiceLink{ResourceID: id, Role: role, Position: pos})
		}
		return nil
	}
	switch {
	case len(in.Roles) > 0 && len(in.ResourceIDs) > 0:
		return nil, booking.Invalid("invalid_roles", "give resource_ids or roles, not both").WithField("roles")
	case len(in.Roles) > 0:
		if len(in.Roles) > 10 {
			return nil, booking.Invalid("invalid_roles", "a service has at most 10 roles").WithField("roles")
		}
		names := map[string]bool{}
		for i, r := range in.Roles {
			if err := booking.CheckName("role", r.Role, booking.MaxTagLen); err != nil || names[r.Role] {
				return nil, booking.Invalid("invalid_roles", "every role needs a name of its own, 1 to %d characters", booking.MaxTagLen).WithField("roles")
			}
			names[r.Role] = true
			if len(r.ResourceIDs) == 0 {
				return nil, booking.Invalid("invalid_roles", "role %q needs at least one resource", r.Role).WithField("roles")
			}
			if err := add("roles", r.Role, i, r.ResourceIDs); err != nil {
				return nil, err
			}
		}
	default:
		if err := add("resource_ids", "", 0, in.ResourceIDs); err != nil {
			return nil, err
		}
	}
	if len(links) == 0 || len(links) > 100 {
		return nil, booking.Invalid("invalid_resource_ids", "a service needs 1 to 100 resources").WithField("resource_ids")
	}
	return links, nil
}

func toService(si *catalog.ServiceInfo) Service {
	s := si.Service
	return Service{ID: s.ID, VenueID: s.VenueID, Name: s.Name, DurationMinutes: s.DurationMinutes, PrepMinutes: s.PrepMinutes,
		CleanupMinutes: s.CleanupMinutes, ResourceIDs: si.ResourceIDs, Roles: toRoles(si.Roles), PriceCents: s.PriceCents, Status: s.Status, CreatedAt: s.CreatedAt}
}

func toRoles(rs []catalog.Role) []ServiceRole {
	if rs == nil {
		return nil
	}
	out := make([]ServiceRole, len(rs))
	for i, r := range rs {
		out[i] = ServiceRole(r)
	}
	return out
}

// ListServices lists services, of one venue when venueID != 0. Anyone.
func (cg *Catalog) ListServices(ctx context.Context, venueID uint64) ([]Service, error) {
	rows, by, err := cg.ss.Services(ctx, venueID)
	if err != nil {
		return nil, err
	}
	out := make([]Service, len(rows))
	for i, s := range rows {
		out[i] = toService(catalog.ServiceInfoOf(s, by[s.ID]))
		if vi, err := cg.cat.Venue(ctx, s.VenueID); err == nil {
			out[i].CreatedAt = out[i].CreatedAt.In(vi.Loc)
		}
	}
	return out, nil
}

// SetGracePolicy sets the grace of a resource category. Admin only.
func (cg *Catalog) SetGracePolicy(ctx context.Context, a booking.Actor, in GracePolicy) (GracePolicy, error) {
	if err := a.RequireAdmin(); err != nil {
		return GracePolicy{}, err
	}
	if _, err := booking.ParseGrace(booking.GraceInput{Category: in.Category, GraceSeconds: in.GraceSeconds, Peak: in.Peak}); err != nil {
		return GracePolicy{}, err
	}
	if in.Peak == nil {
		in.Peak = []booking.PeakRule{}
	}
	if err := cg.ss.SetGrace(ctx, booking.GraceInput{Category: in.Category, GraceSeconds: in.GraceSeconds, Peak: in.Peak}, cg.clock.Now()); err != nil {
		return GracePolicy{}, err
	}
	if err := cg.cat.ChangedGraces(ctx); err != nil {
		return GracePolicy{}, err
	}
	return in, nil
}

// SetReleaseMode sets a venue's release mode; it takes effect at the venue's next release batch, on
// every instance. The venue's manager or an admin.
func (cg *Catalog) SetReleaseMode(ctx context.Context, a booking.Actor, venueID uint64, mode string) (Venue, error) {
	if err := a.RequireManager(venueID); err != nil {
		return Venue{}, err
	}
	m, err := booking.ParseReleaseMode(mode)
	if err != nil {
		return Venue{}, err
	}
	v, err := cg.ss.Venue(ctx, venueID)
	if err != nil {
		return Venue{}, err
	}
	v.ReleaseMode = string(m)
	if err := cg.ss.UpdateVenue(ctx, &v, "release_mode"); err != nil {
		return Venue{}, err
	}
	if err := cg.cat.ChangedVenue(ctx, venueID); err != nil {
		return Venue{}, err
	}
	release.ObserveMode(venueID, m)
	return cg.toVenue(v), nil
}
