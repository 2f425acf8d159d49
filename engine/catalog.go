package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
	"github.com/slotwheel/slotwheel/models"
)

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

// cacheTTL bounds how stale another instance's view of an admin change can be; this instance
// forgets its own entries on every change it makes.
const cacheTTL = 5 * time.Second

// catalog caches what the hold path reads on every request — venues, resources with their parsed
// schedules, services and grace policies — so that a hold costs Redis only. When SQL does not answer,
// an expired entry is served anyway: holds and availability of loaded days keep working through a
// MySQL outage (docs/API.md "Outages"), and the catalog changes only through admin calls, which
// need MySQL themselves.
type catalog struct {
	ss    *sqlstore.Store
	clock clock.Clock

	venues    cache[uint64, *venueInfo]
	resources cache[uint64, *resourceInfo]
	services  cache[uint64, *serviceInfo]
	graces    cache[struct{}, map[string]booking.Grace]
	venueIDs  cache[struct{}, []uint64]
	// policies are the booking rules of a venue's resources that have some, for the release batches
	// (which must not look anything up inside their transaction).
	policies cache[uint64, map[uint64]booking.Policy]
	noshow   cache[struct{}, booking.NoshowPolicy]
}

func newCatalog(ss *sqlstore.Store, clk clock.Clock) *catalog {
	c := &catalog{ss: ss, clock: clk}
	h := &sqlHealth{}
	c.venues.health, c.resources.health, c.services.health, c.graces.health = h, h, h, h
	c.venueIDs.health, c.policies.health, c.noshow.health = h, h, h
	return c
}

type venueInfo struct {
	venue models.Venue
	loc   *time.Location
}

type resourceInfo struct {
	res    models.Resource
	venue  *venueInfo
	plan   *booking.Plan  // nil until a schedule is set
	policy booking.Policy // the defaults until one is set
}

type serviceInfo struct {
	svc       models.Service
	resources []uint64      // every resource that delivers it
	roles     []ServiceRole // a multi-resource service's roles, in order; nil otherwise
}

// serviceInfoOf builds a service's cache entry from its links.
func serviceInfoOf(s models.Service, links []models.ServiceResource) *serviceInfo {
	si := &serviceInfo{svc: s}
	for _, l := range links {
		si.resources = append(si.resources, l.ResourceID)
		if l.Role == "" {
			continue
		}
		if n := len(si.roles); n == 0 || si.roles[n-1].Role != l.Role {
			si.roles = append(si.roles, ServiceRole{Role: l.Role})
		}
		last := &si.roles[len(si.roles)-1]
		last.ResourceIDs = append(last.ResourceIDs, l.ResourceID)
	}
	return si
}

// While SQL is failing, a stale entry is answered at once: staleLoadWait bounds how long a load may
// keep a request waiting when a stale copy could answer instead, and once a load failed that way SQL
// counts as down until a load succeeds: requests with a stale copy answer from it without waiting,
// while one load per key at a time goes on probing. A MySQL outage then costs the hold path one
// short wait at its start, not a wait per request or per period.
const staleLoadWait = 500 * time.Millisecond

// sqlHealth remembers whether a catalog load found SQL unavailable since the last load that
// succeeded; every cache of a catalog shares it, as they share the database.
type sqlHealth struct{ isDown atomic.Bool }

func (h *sqlHealth) down() bool { return h.isDown.Load() }

// cache is a map of entries loaded on demand and kept for cacheTTL. Concurrent loads of one key
// share one SQL query.
type cache[K comparable, V any] struct {
	mu    sync.RWMutex
	m     map[K]cacheEntry[V]
	gen   uint64 // counts forgets, so that a load begun before one does not store what it read
	loads singleflight.Group
	// loading holds the keys with a load running: while SQL is down a request with a stale copy
	// starts a load only when none runs, instead of joining one (a load hanging on a silent MySQL
	// would gather a waiter per request until it times out).
	loading sync.Map
	health  *sqlHealth // set by newCatalog
}

type cacheEntry[V any] struct {
	v  V
	at time.Time
}

// get answers key from the cache when it is fresh, else loads it. When SQL is unavailable — the
// load fails so, or takes longer than staleLoadWait, or SQL is down since an earlier load — a stale
// entry is answered instead. The load goes on without the request (and while SQL is down,
// one load per key at a time probes it), and fills the cache when it succeeds.
func (c *cache[K, V]) get(ctx context.Context, now time.Time, key K, load func(context.Context) (V, error)) (V, error) {
	c.mu.RLock()
	e, ok := c.m[key]
	gen := c.gen
	c.mu.RUnlock()
	if ok && now.Sub(e.at) < cacheTTL && !now.Before(e.at) {
		return e.v, nil
	}
	k := fmt.Sprint(key)
	if ok && c.health.down() {
		if _, busy := c.loading.Load(k); !busy {
			c.loads.DoChan(k, c.loader(ctx, now, key, k, gen, load))
		}
		return e.v, nil
	}
	ch := c.loads.DoChan(k, c.loader(ctx, now, key, k, gen, load))
	var wait <-chan time.Time
	if ok {
		t := time.NewTimer(staleLoadWait)
		defer t.Stop()
		wait = t.C
	}
	select {
	case r := <-ch:
		if r.Err == nil {
			return r.Val.(V), nil
		}
		if ok && errors.Is(r.Err, booking.ErrStorageUnavailable) {
			return e.v, nil
		}
		var zero V
		return zero, r.Err
	case <-wait:
		c.health.isDown.Store(true)
		return e.v, nil
	case <-ctx.Done():
		var zero V
		return zero, fmt.Errorf("catalog: %w: %w", booking.ErrStorageUnavailable, ctx.Err())
	}
}

// loader is the shared load of key (k: its name in loads and loading): it records whether SQL
// answered, and stores what it read unless the key was forgotten since gen. It marks the key
// loading while it runs (only a running load sets the mark, so none is left behind).
func (c *cache[K, V]) loader(ctx context.Context, now time.Time, key K, k string, gen uint64, load func(context.Context) (V, error)) func() (any, error) {
	return func() (any, error) {
		c.loading.Store(k, true)
		defer c.loading.Delete(k)
		// Not the caller's context: the load is shared, and goes on when its callers stop waiting.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
		defer cancel()
		v, err := load(lctx)
		if err != nil {
			if errors.Is(err, booking.ErrStorageUnavailable) {
				c.health.isDown.Store(true)
			}
			return v, err
		}
		c.health.isDown.Store(false)
		c.mu.Lock()
		if c.m == nil {
			c.m = map[K]cacheEntry[V]{}
		}
		if c.gen == gen {
			c.m[key] = cacheEntry[V]{v: v, at: now}
		}
		c.mu.Unlock()
		return v, nil
	}
}

// loadTimeout bounds one catalog load, whoever waits for it.
const loadTimeout = 10 * time.Second

// peek answers key from the cache, fresh or not, without loading it.
func (c *cache[K, V]) peek(key K) (V, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.m[key]
	return e.v, ok
}

// fresh answers key from the cache when it is fresh, without loading it.
func (c *cache[K, V]) fresh(now time.Time, key K) (V, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.m[key]
	if !ok || now.Sub(e.at) >= cacheTTL || now.Before(e.at) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// forget drops key after a change made here; a load under way keeps its answer to itself, and the
// next get loads again.
func (c *cache[K, V]) forget(key K) {
	c.mu.Lock()
	delete(c.m, key)
	c.gen++
	c.mu.Unlock()
	c.loads.Forget(fmt.Sprint(key))
}

func (c *catalog) venue(ctx context.Context, id uint64) (*venueInfo, error) {
	return c.venues.get(ctx, c.clock.Now(), id, func(ctx context.Context) (*venueInfo, error) {
		v, err := c.ss.Venue(ctx, id)
		if err != nil {
			return nil, err
		}
		return venueInfoOf(v)
	})
}

// venueInfoOf is what the cache keeps of a venue row.
func venueInfoOf(v models.Venue) (*venueInfo, error) {
	loc, err := time.LoadLocation(v.Timezone)
	if err != nil {
		return nil, fmt.Errorf("venue %d has a bad time zone %q: %w", v.ID, v.Timezone, err)
	}
	return &venueInfo{venue: v, loc: loc}, nil
}

func (c *catalog) resource(ctx context.Context, id uint64) (*resourceInfo, error) {
	return c.resources.get(ctx, c.clock.Now(), id, func(ctx context.Context) (*resourceInfo, error) {
		r, sc, err := c.ss.Resource(ctx, id)
		if err != nil {
			return nil, err
		}
		vi, err := c.venue(ctx, r.VenueID)
		if err != nil {
			return nil, err
		}
		ri := &resourceInfo{res: r, venue: vi, policy: booking.DefaultPolicy()}
		p, ok, err := c.ss.Policy(ctx, id)
		if err != nil {
			return nil, err
		}
		if ok {
			ri.policy = sqlstore.PolicyOf(p)
		}
		if sc != nil {
			if ri.plan, err = planFromRow(*sc); err != nil {
				return nil, fmt.Errorf("resource %d has a bad stored schedule: %w", id, err)
			}
		}
		return ri, nil
	})
}

func (c *catalog) service(ctx context.Context, id uint64) (*serviceInfo, error) {
	return c.services.get(ctx, c.clock.Now(), id, func(ctx context.Context) (*serviceInfo, error) {
		s, links, err := c.ss.Service(ctx, id)
		if err != nil {
			return nil, err
		}
		return serviceInfoOf(s, links), nil
	})
}

func (c *catalog) grace(ctx context.Context) (map[string]booking.Grace, error) {
	return c.graces.get(ctx, c.clock.Now(), struct{}{}, func(ctx context.Context) (map[string]booking.Grace, error) {
		rows, err := c.ss.Graces(ctx)
		if err != nil {
			return nil, err
		}
		out := make(map[string]booking.Grace, len(rows))
		for _, r := range rows {
			in := booking.GraceInput{Category: r.Category, GraceSeconds: r.GraceSeconds}
			if err := json.Unmarshal([]byte(r.Peak), &in.Peak); err != nil {
				return nil, fmt.Errorf("grace policy %q: %w", r.Category, err)
			}
			g, err := booking.ParseGrace(in)
			if err != nil {
				return nil, fmt.Errorf("grace policy %q: %w", r.Category, err)
			}
			out[r.Category] = g
		}
		return out, nil
	})
}

// venuePolicies answers the booking rules of a venue's resources; a resource missing from the map
// has the defaults.
func (c *catalog) venuePolicies(ctx context.Context, venueID uint64) (map[uint64]booking.Policy, error) {
	return c.policies.get(ctx, c.clock.Now(), venueID, func(ctx context.Context) (map[uint64]booking.Policy, error) {
		rs, err := c.ss.Resources(ctx, venueID)
		if err != nil || len(rs) == 0 {
			return map[uint64]booking.Policy{}, err
		}
		ids := make([]uint64, len(rs))
		for i, r := range rs {
			ids[i] = r.ID
		}
		rows, err := c.ss.Policies(ctx, ids)
		if err != nil {
			return nil, err
		}
		out := make(map[uint64]booking.Policy, len(rows))
		for _, r := range rows {
			out[r.ResourceID] = sqlstore.PolicyOf(r)
		}
		return out, nil
	})
}

// cachedReleaseRules answers, from the cache alone, what a release batch needs of venue v — its
// zone (events are rendered in it) and its resources' booking rules — when both are fresh; a
// batch holding rows must not wait for a load (see release.Service.decideBatch).
func (c *catalog) cachedReleaseRules(now time.Time, v uint64) (map[uint64]booking.Policy, bool) {
	_, zoned := c.venues.fresh(now, v)
	ps, ok := c.policies.fresh(now, v)
	return ps, zoned && ok
}

// loadReleaseRules loads into the cache what cachedReleaseRules answers for venue v.
func (c *catalog) loadReleaseRules(ctx context.Context, v uint64) error {
	if _, err := c.venue(ctx, v); err != nil {
		return err
	}
	_, err := c.venuePolicies(ctx, v)
	return err
}

// noshowPolicy answers the no-show freeze rule (the zero value while it is off).
func (c *catalog) noshowPolicy(ctx context.Context) (booking.NoshowPolicy, error) {
	return c.noshow.get(ctx, c.clock.Now(), struct{}{}, func(ctx context.Context) (booking.NoshowPolicy, error) {
		row, ok, err := c.ss.NoshowPolicy(ctx)
		if err != nil || !ok {
			return booking.NoshowPolicy{}, err
		}
		return booking.ParseNoshowPolicy(booking.NoshowPolicyInput{MaxNoshows: row.MaxNoshows, WithinDays: row.WithinDays,
			FreezeDays: row.FreezeDays})
	})
}

// warm loads the entries every hold reads whatever it books (the no-show rule, the grace policies,
// the venue list) and every venue (its zone: answers are in it), in a few queries, so that an
// instance that has served no hold yet still holds through a MySQL outage: a cached entry, however
// old, is answered while SQL is down (cache.get).
func (c *catalog) warm(ctx context.Context) error {
	_, err1 := c.noshowPolicy(ctx)
	_, err2 := c.grace(ctx)
	_, err3 := c.venueList(ctx)
	vs, err4 := c.ss.Venues(ctx)
	for _, v := range vs {
		info, err := venueInfoOf(v)
		if err != nil {
			continue // the venue's own reads report it
		}
		_, _ = c.venues.get(ctx, c.clock.Now(), v.ID, func(context.Context) (*venueInfo, error) { return info, nil })
	}
	return errors.Join(err1, err2, err3, err4)
}

// venueList lists every venue id; the wheel ticks over it.
func (c *catalog) venueList(ctx context.Context) ([]uint64, error) {
	return c.venueIDs.get(ctx, c.clock.Now(), struct{}{}, func(ctx context.Context) ([]uint64, error) { return c.ss.VenueIDs(ctx) })
}

func planFromRow(s models.Schedule) (*booking.Plan, error) {
	in := booking.ScheduleInput{SlotMinutes: s.SlotMinutes, HorizonDays: s.HorizonDays}
	if err := json.Unmarshal([]byte(s.Weekly), &in.Weekly); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(s.Exceptions), &in.Exceptions); err != nil {
		return nil, err
	}
	return booking.BuildPlan(in)
}

// offer is a resource as it is sold, through a service when si is set.
func offer(ri *resourceInfo, si *serviceInfo) booking.Offer {
	o := booking.Offer{ResourceID: ri.res.ID, Capacity: ri.res.Capacity, PriceCents: ri.res.PriceCents,
		Active: ri.res.Status == models.ResourceActive, Plan: ri.plan, Loc: ri.venue.loc, Policy: ri.policy}
	if si != nil {
		o.Service = &booking.ServiceTerms{ID: si.svc.ID, Duration: minutes(si.svc.DurationMinutes),
			Prep: minutes(si.svc.PrepMinutes), Cleanup: minutes(si.svc.CleanupMinutes), PriceCents: si.svc.PriceCents}
	}
	return o
}

func minutes(n int) time.Duration { return time.Duration(n) * time.Minute }

// graceFor is the grace of a booking of ri starting at start.
func (cg *Catalog) graceFor(ctx context.Context, ri *resourceInfo, start time.Time) (time.Duration, error) {
	policies, err := cg.cat.grace(ctx)
	if err != nil {
		return 0, err
	}
	return booking.GraceFor(policies, ri.res.Category, cg.opts.DefaultGrace, start, ri.venue.loc), nil
}

// unknown turns "not found" of a referenced object into the request's own error.
func unknown(err error, code, format string, args ...any) error {
	if errors.Is(err, booking.ErrNotFound) {
		return booking.Invalid(code, format, args...)
	}
	return err
}

func requireAdmin(a booking.Actor) error {
	if a.Role != booking.RoleAdmin {
		return booking.ErrForbidden
	}
	return nil
}

// CreateVenue adds a venue. Admin only.
func (cg *Catalog) CreateVenue(ctx context.Context, a booking.Actor, in VenueInput) (Venue, error) {
	if err := requireAdmin(a); err != nil {
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
	cg.cat.venueIDs.forget(struct{}{})
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
		mode = string(cg.opts.ReleaseMode)
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

// CreateResource adds a resource to a venue. Admin only.
func (cg *Catalog) CreateResource(ctx context.Context, a booking.Actor, in ResourceInput) (Resource, error) {
	if err := requireAdmin(a); err != nil {
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
	vi, err := cg.cat.venue(ctx, in.VenueID)
	if err != nil {
		return Resource{}, unknown(err, "unknown_venue", "venue %d does not exist", in.VenueID)
	}
	r, err := cg.ss.CreateResource(ctx, sqlstore.NewResource{VenueID: in.VenueID, Name: in.Name, Kind: in.Kind,
		Capacity: in.Capacity, Category: in.Category, PriceCents: in.PriceCents}, cg.clock.Now())
	if err != nil {
		return Resource{}, err
	}
	out := toResource(r, 0)
	out.CreatedAt = out.CreatedAt.In(vi.loc)
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
		if vi, err := cg.cat.venue(ctx, r.VenueID); err == nil {
			out[i].CreatedAt = out[i].CreatedAt.In(vi.loc)
		}
	}
	return out, nil
}

// CreateService adds a service deliverable on some resources of one venue — any one of ResourceIDs,
// or, for a service that needs several resources at once, one of every role's. Admin only.
func (cg *Catalog) CreateService(ctx context.Context, a booking.Actor, in ServiceInput) (Service, error) {
	if err := requireAdmin(a); err != nil {
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
	vi, err := cg.cat.venue(ctx, in.VenueID)
	if err != nil {
		return Service{}, unknown(err, "unknown_venue", "venue %d does not exist", in.VenueID)
	}
	for _, l := range links {
		ri, err := cg.cat.resource(ctx, l.ResourceID)
		if err == nil && ri.res.VenueID != in.VenueID {
			err = booking.ErrNotFound
		}
		if err != nil {
			return Service{}, unknown(err, "unknown_resource", "resource %d is not a resource of venue %d", l.ResourceID, in.VenueID)
		}
		if ri.plan != nil {
			if err := booking.CheckServiceDuration(in.DurationMinutes, ri.plan.SlotMinutes()); err != nil {
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
	out := toService(serviceInfoOf(s, rows))
	out.CreatedAt = out.CreatedAt.In(vi.loc)
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

func toService(si *serviceInfo) Service {
	s := si.svc
	return Service{ID: s.ID, VenueID: s.VenueID, Name: s.Name, DurationMinutes: s.DurationMinutes, PrepMinutes: s.PrepMinutes,
		CleanupMinutes: s.CleanupMinutes, ResourceIDs: si.resources, Roles: si.roles, PriceCents: s.PriceCents, CreatedAt: s.CreatedAt}
}

// ListServices lists services, of one venue when venueID != 0. Anyone.
func (cg *Catalog) ListServices(ctx context.Context, venueID uint64) ([]Service, error) {
	rows, by, err := cg.ss.Services(ctx, venueID)
	if err != nil {
		return nil, err
	}
	out := make([]Service, len(rows))
	for i, s := range rows {
		out[i] = toService(serviceInfoOf(s, by[s.ID]))
		if vi, err := cg.cat.venue(ctx, s.VenueID); err == nil {
			out[i].CreatedAt = out[i].CreatedAt.In(vi.loc)
		}
	}
	return out, nil
}

// SetGracePolicy sets the grace of a resource category. Admin only.
func (cg *Catalog) SetGracePolicy(ctx context.Context, a booking.Actor, in GracePolicy) (GracePolicy, error) {
	if err := requireAdmin(a); err != nil {
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
	cg.cat.graces.forget(struct{}{})
	return in, nil
}

// SetReleaseMode sets a venue's release mode; it takes effect at the venue's next release batch, on
// every instance. Admin only.
func (cg *Catalog) SetReleaseMode(ctx context.Context, a booking.Actor, venueID uint64, mode string) (Venue, error) {
	if err := requireAdmin(a); err != nil {
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
	cg.cat.venues.forget(venueID)
	release.ObserveMode(venueID, m)
	return cg.toVenue(v), nil
}
