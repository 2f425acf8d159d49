// Package catalog caches what the hold path reads of the catalog on every request — venues with
// their zones, resources with their parsed schedules and booking rules, services, grace and no-show
// policies — so that a hold costs Redis only, and answers from a stale copy while MySQL is down. The
// catalog's admin changes (engine.Catalog) write SQL and then tell the cache what changed (Changed*):
// it forgets its own copy and moves the venue's catalog version on in Redis, so that every other
// instance's next read sees its copy is older and reads again (docs/DESIGN.md "One catalog").
package catalog

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
	"github.com/slotwheel/slotwheel/internal/sqlstore"
	"github.com/slotwheel/slotwheel/models"
)

// cacheTTL is how long an entry is kept before it is read from SQL again. It is not what keeps
// instances in agreement — the catalog versions are (Versions) — but what bounds how long a copy can
// outlive a version Redis could not be asked for.
const cacheTTL = 5 * time.Second

// Versions is where the catalog's versions live (Redis): one per venue, moved on after every admin
// change of what the venue sells or its rules (and of every venue's after a change that spans
// venues), and one (venue 0) for the settings that span venues. An entry remembers the versions it
// was read at, read before its SQL load, and is read again once they moved on.
type Versions interface {
	CatalogVersions(ctx context.Context, venueIDs ...uint64) ([]string, error)
	BumpCatalog(ctx context.Context, venueIDs []uint64) error
}

// Version is the pair of catalog versions an entry was read at: its venue's and the global one.
// The hold scripts compare Venue with Redis's; a change spanning venues moves every venue's on too.
type Version struct{ Venue, Global string }

func (v Version) known() bool { return v.Global != "" }

// Cache caches what the hold path reads on every request — venues, resources with their parsed
// schedules, services and grace policies — so that a hold costs Redis only. When SQL does not answer,
// an expired entry is served anyway: holds and availability of loaded days keep working through a
// MySQL outage (docs/API.md "Outages"), and the Cache changes only through admin calls, which
// need MySQL themselves.
type Cache struct {
	ss    *sqlstore.Store
	clock clock.Clock
	vers  Versions

	venues    cache[uint64, *VenueInfo]
	resources cache[uint64, *ResourceInfo]
	services  cache[uint64, *ServiceInfo]
	graces    cache[struct{}, map[string]booking.Grace]
	venueIDs  cache[struct{}, []uint64]
	// policies are the booking rules of a venue's resources that have some, for the release batches
	// (which must not look anything up inside their transaction).
	policies cache[uint64, map[uint64]booking.Policy]
	noshow   cache[struct{}, booking.NoshowPolicy]
}

// New builds a cache over ss whose entries are kept fresh by vers; clk says when they are reread.
func New(ss *sqlstore.Store, clk clock.Clock, vers Versions) *Cache {
	c := &Cache{ss: ss, clock: clk, vers: vers}
	h := &sqlHealth{}
	c.venues.health, c.resources.health, c.services.health, c.graces.health = h, h, h, h
	c.venueIDs.health, c.policies.health, c.noshow.health = h, h, h
	byKey := func(k uint64) (uint64, bool) { return k, true }
	global := func(struct{}) (uint64, bool) { return 0, true }
	c.venues.scope, c.policies.scope = byKey, byKey
	c.graces.scope, c.venueIDs.scope, c.noshow.scope = global, global, global
	// A resource or a service never moves to another venue: once one is read, its venue is known.
	c.resources.scope, c.resources.owner = c.resources.learned, func(r *ResourceInfo) uint64 { return r.Resource.VenueID }
	c.services.scope, c.services.owner = c.services.learned, func(s *ServiceInfo) uint64 { return s.Service.VenueID }
	c.venues.read, c.resources.read, c.services.read, c.graces.read = c.version, c.version, c.version, c.version
	c.venueIDs.read, c.policies.read, c.noshow.read = c.version, c.version, c.version
	return c
}

// version reads the versions of venueID (0: the global one alone); the zero Version when Redis does
// not answer, which no entry is ever kept fresh by.
func (c *Cache) version(ctx context.Context, venueID uint64) Version {
	if c.vers == nil {
		return Version{}
	}
	if venueID == 0 {
		vs, err := c.vers.CatalogVersions(ctx, 0)
		if err != nil {
			return Version{}
		}
		return Version{Global: vs[0]}
	}
	vs, err := c.vers.CatalogVersions(ctx, venueID, 0)
	if err != nil {
		return Version{}
	}
	return Version{Venue: vs[0], Global: vs[1]}
}

// VenueInfo is what the cache keeps of a venue.
type VenueInfo struct {
	Venue models.Venue
	Loc   *time.Location
}

// ResourceInfo is what the cache keeps of a resource: its row, its venue, its plan and its rules.
type ResourceInfo struct {
	Resource models.Resource
	Venue    *VenueInfo
	Plan     *booking.Plan  // nil until a schedule is set
	Policy   booking.Policy // the defaults until one is set
}

// ServiceInfo is what the cache keeps of a service: its row and the resources that deliver it.
type ServiceInfo struct {
	Service     models.Service
	ResourceIDs []uint64 // every resource that delivers it
	Roles       []Role   // a multi-resource service's roles, in order; nil otherwise
}

// ServiceInfoOf builds a service's cache entry from its links.
func ServiceInfoOf(s models.Service, links []models.ServiceResource) *ServiceInfo {
	si := &ServiceInfo{Service: s}
	for _, l := range links {
		si.ResourceIDs = append(si.ResourceIDs, l.ResourceID)
		if l.Role == "" {
			continue
		}
		if n := len(si.Roles); n == 0 || si.Roles[n-1].Role != l.Role {
			si.Roles = append(si.Roles, Role{Role: l.Role})
		}
		last := &si.Roles[len(si.Roles)-1]
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
	health  *sqlHealth // set by New
	// read reads catalog versions (Cache.version).
	read func(ctx context.Context, venueID uint64) Version
	// scope answers the venue whose version key's entry follows (0: the global one alone), if known
	// before reading it; owner answers it from an entry once read (nil: scope always knows).
	scope  func(K) (uint64, bool)
	owner  func(V) uint64
	owners sync.Map // K → venue id, for learned
}

// learned is a scope for entries whose venue is known once one was read.
func (c *cache[K, V]) learned(key K) (uint64, bool) {
	v, ok := c.owners.Load(key)
	if !ok {
		return 0, false
	}
	return v.(uint64), true
}

type cacheEntry[V any] struct {
	v   V
	at  time.Time
	ver Version // the versions read before it was loaded
}

// get answers key from the cache when it is fresh — kept for less than cacheTTL and, when check is
// set, read at the catalog versions Redis has now — else loads it. Without check the caller compares
// the versions itself (the hold scripts do, in the hold's own round trip). When SQL is unavailable —
// the load fails so, or takes longer than staleLoadWait, or SQL is down since an earlier load — a
// stale entry is answered instead. The load goes on without the request (and while SQL is down,
// one load per key at a time probes it), and fills the cache when it succeeds.
func (c *cache[K, V]) get(ctx context.Context, now time.Time, key K, check bool, load func(context.Context) (V, error)) (V, Version, error) {
	c.mu.RLock()
	e, ok := c.m[key]
	gen := c.gen
	c.mu.RUnlock()
	if ok && now.Sub(e.at) < cacheTTL && !now.Before(e.at) && (!check || c.current(ctx, key, e)) {
		return e.v, e.ver, nil
	}
	k := fmt.Sprint(key)
	if ok && c.health.down() {
		if _, busy := c.loading.Load(k); !busy {
			c.loads.DoChan(k, c.loader(ctx, now, key, k, gen, load))
		}
		return e.v, e.ver, nil
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
			got := r.Val.(cacheEntry[V])
			return got.v, got.ver, nil
		}
		if ok && errors.Is(r.Err, booking.ErrStorageUnavailable) {
			return e.v, e.ver, nil
		}
		var zero V
		return zero, Version{}, r.Err
	case <-wait:
		c.health.isDown.Store(true)
		return e.v, e.ver, nil
	case <-ctx.Done():
		var zero V
		return zero, Version{}, fmt.Errorf("catalog: %w: %w", booking.ErrStorageUnavailable, ctx.Err())
	}
}

// current reports whether entry e of key was read at the catalog versions Redis has now. Without an
// answer from Redis it is taken as current: the entry still ends at cacheTTL.
func (c *cache[K, V]) current(ctx context.Context, key K, e cacheEntry[V]) bool {
	venue, ok := c.scope(key)
	if !ok {
		venue = c.owner(e.v)
	}
	now := c.read(ctx, venue)
	return !now.known() || now == e.ver
}

// loader is the shared load of key (k: its name in loads and loading): it reads the versions the
// entry will be kept fresh by, then the entry, records whether SQL answered, and stores what it read
// unless the key was forgotten since gen. It marks the key loading while it runs (only a running
// load sets the mark, so none is left behind).
func (c *cache[K, V]) loader(ctx context.Context, now time.Time, key K, k string, gen uint64, load func(context.Context) (V, error)) func() (any, error) {
	return func() (any, error) {
		c.loading.Store(k, true)
		defer c.loading.Delete(k)
		// Not the caller's context: the load is shared, and goes on when its callers stop waiting.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
		defer cancel()
		// The versions are read before the entry: a change committed after the read moves them on,
		// and the entry is read again at its next use.
		venue, known := c.scope(key)
		var ver Version
		if known {
			ver = c.read(lctx, venue)
		}
		v, err := load(lctx)
		if err == nil && !known {
			// The first read of this key: now that its venue is known, read again after its versions.
			venue = c.owner(v)
			c.owners.Store(key, venue)
			ver = c.read(lctx, venue)
			v, err = load(lctx)
		}
		if err != nil {
			if errors.Is(err, booking.ErrStorageUnavailable) {
				c.health.isDown.Store(true)
			}
			return cacheEntry[V]{}, err
		}
		c.health.isDown.Store(false)
		e := cacheEntry[V]{v: v, at: now, ver: ver}
		c.mu.Lock()
		if c.m == nil {
			c.m = map[K]cacheEntry[V]{}
		}
		if c.gen == gen {
			c.m[key] = e
		}
		c.mu.Unlock()
		return e, nil
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

// Venue answers venue id.
func (c *Cache) Venue(ctx context.Context, id uint64) (*VenueInfo, error) {
	v, _, err := c.VenueAt(ctx, id, true)
	return v, err
}

// VenueAt answers venue id with the versions it was read at; check compares them with Redis's
// first (the hold path leaves that to its script: engine/holds.go).
func (c *Cache) VenueAt(ctx context.Context, id uint64, check bool) (*VenueInfo, Version, error) {
	return c.venues.get(ctx, c.clock.Now(), id, check, func(ctx context.Context) (*VenueInfo, error) {
		v, err := c.ss.Venue(ctx, id)
		if err != nil {
			return nil, err
		}
		return venueInfoOf(v)
	})
}

// venueInfoOf is what the cache keeps of a venue row.
func venueInfoOf(v models.Venue) (*VenueInfo, error) {
	loc, err := time.LoadLocation(v.Timezone)
	if err != nil {
		return nil, fmt.Errorf("venue %d has a bad time zone %q: %w", v.ID, v.Timezone, err)
	}
	return &VenueInfo{Venue: v, Loc: loc}, nil
}

// Resource answers resource id, with its venue.
func (c *Cache) Resource(ctx context.Context, id uint64) (*ResourceInfo, error) {
	v, _, err := c.ResourceAt(ctx, id, true)
	return v, err
}

// ResourceAt answers resource id with the versions it was read at; check compares them with Redis's
// first (the hold path leaves that to its script: engine/holds.go).
func (c *Cache) ResourceAt(ctx context.Context, id uint64, check bool) (*ResourceInfo, Version, error) {
	return c.resources.get(ctx, c.clock.Now(), id, check, func(ctx context.Context) (*ResourceInfo, error) {
		r, sc, err := c.ss.Resource(ctx, id)
		if err != nil {
			return nil, err
		}
		vi, err := c.Venue(ctx, r.VenueID)
		if err != nil {
			return nil, err
		}
		ri := &ResourceInfo{Resource: r, Venue: vi, Policy: booking.DefaultPolicy()}
		p, ok, err := c.ss.Policy(ctx, id)
		if err != nil {
			return nil, err
		}
		if ok {
			ri.Policy = sqlstore.PolicyOf(p)
		}
		if sc != nil {
			if ri.Plan, err = planFromRow(*sc); err != nil {
				return nil, fmt.Errorf("resource %d has a bad stored schedule: %w", id, err)
			}
		}
		return ri, nil
	})
}

// Service answers service id.
func (c *Cache) Service(ctx context.Context, id uint64) (*ServiceInfo, error) {
	v, _, err := c.ServiceAt(ctx, id, true)
	return v, err
}

// ServiceAt answers service id with the versions it was read at; check compares them with Redis's
// first (the hold path leaves that to its script: engine/holds.go).
func (c *Cache) ServiceAt(ctx context.Context, id uint64, check bool) (*ServiceInfo, Version, error) {
	return c.services.get(ctx, c.clock.Now(), id, check, func(ctx context.Context) (*ServiceInfo, error) {
		s, links, err := c.ss.Service(ctx, id)
		if err != nil {
			return nil, err
		}
		return ServiceInfoOf(s, links), nil
	})
}

// Grace answers the grace policies by category.
func (c *Cache) Grace(ctx context.Context) (map[string]booking.Grace, error) {
	v, _, err := c.graces.get(ctx, c.clock.Now(), struct{}{}, true, func(ctx context.Context) (map[string]booking.Grace, error) {
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
	return v, err
}

// VenuePolicies answers the booking rules of a venue's resources; a resource missing from the map
// has the defaults.
func (c *Cache) VenuePolicies(ctx context.Context, venueID uint64) (map[uint64]booking.Policy, error) {
	v, _, err := c.policies.get(ctx, c.clock.Now(), venueID, true, func(ctx context.Context) (map[uint64]booking.Policy, error) {
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
	return v, err
}

// CachedReleaseRules answers, from the cache alone, what a release batch needs of venue v — its
// zone (events are rendered in it) and its resources' booking rules — when both are fresh; a
// batch holding rows must not wait for a load (see release.Service.decideBatch).
func (c *Cache) CachedReleaseRules(now time.Time, v uint64) (map[uint64]booking.Policy, bool) {
	_, zoned := c.venues.fresh(now, v)
	ps, ok := c.policies.fresh(now, v)
	return ps, zoned && ok
}

// LoadReleaseRules loads into the cache what CachedReleaseRules answers for venue v.
func (c *Cache) LoadReleaseRules(ctx context.Context, v uint64) error {
	if _, err := c.Venue(ctx, v); err != nil {
		return err
	}
	_, err := c.VenuePolicies(ctx, v)
	return err
}

// NoshowPolicy answers the no-show freeze rule (the zero value while it is off).
func (c *Cache) NoshowPolicy(ctx context.Context) (booking.NoshowPolicy, error) {
	v, _, err := c.NoshowPolicyAt(ctx, true)
	return v, err
}

// NoshowPolicyAt answers the no-show rule with the versions it was read at; check compares them with Redis's
// first (the hold path leaves that to its script: engine/holds.go).
func (c *Cache) NoshowPolicyAt(ctx context.Context, check bool) (booking.NoshowPolicy, Version, error) {
	return c.noshow.get(ctx, c.clock.Now(), struct{}{}, check, func(ctx context.Context) (booking.NoshowPolicy, error) {
		row, ok, err := c.ss.NoshowPolicy(ctx)
		if err != nil || !ok {
			return booking.NoshowPolicy{}, err
		}
		return booking.ParseNoshowPolicy(booking.NoshowPolicyInput{MaxNoshows: row.MaxNoshows, WithinDays: row.WithinDays,
			FreezeDays: row.FreezeDays})
	})
}

// Warm loads the entries every hold reads whatever it books (the no-show rule, the grace policies,
// the venue list) and every venue (its zone: answers are in it), in a few queries, so that an
// instance that has served no hold yet still holds through a MySQL outage: a cached entry, however
// old, is answered while SQL is down (cache.get).
func (c *Cache) Warm(ctx context.Context) error {
	_, err1 := c.NoshowPolicy(ctx)
	_, err2 := c.Grace(ctx)
	_, err3 := c.VenueList(ctx)
	vs, err4 := c.ss.Venues(ctx)
	for _, v := range vs {
		info, err := venueInfoOf(v)
		if err != nil {
			continue // the venue's own reads report it
		}
		_, _, _ = c.venues.get(ctx, c.clock.Now(), v.ID, false, func(context.Context) (*VenueInfo, error) { return info, nil })
	}
	return errors.Join(err1, err2, err3, err4)
}

// VenueList lists every venue id; the wheel ticks over it.
func (c *Cache) VenueList(ctx context.Context) ([]uint64, error) {
	v, _, err := c.venueIDs.get(ctx, c.clock.Now(), struct{}{}, true, func(ctx context.Context) ([]uint64, error) { return c.ss.VenueIDs(ctx) })
	return v, err
}

// planFromRow parses a stored schedule.
func planFromRow(s models.Schedule) (*booking.Plan, error) {
	in, err := ScheduleInputOf(s)
	if err != nil {
		return nil, err
	}
	return booking.BuildPlan(in)
}

// ScheduleInputOf reads a stored schedule back as the opening rules it was set with.
func ScheduleInputOf(s models.Schedule) (booking.ScheduleInput, error) {
	in := booking.ScheduleInput{SlotMinutes: s.SlotMinutes, HorizonDays: s.HorizonDays}
	if err := json.Unmarshal([]byte(s.Weekly), &in.Weekly); err != nil {
		return in, err
	}
	if err := json.Unmarshal([]byte(s.Exceptions), &in.Exceptions); err != nil {
		return in, err
	}
	return in, nil
}

// Offer is a resource as it is sold, through a service when si is set.
func Offer(ri *ResourceInfo, si *ServiceInfo) booking.Offer {
	o := booking.Offer{ResourceID: ri.Resource.ID, Capacity: ri.Resource.Capacity, PriceCents: ri.Resource.PriceCents,
		Active: ri.Resource.Status == models.ResourceActive, Plan: ri.Plan, Loc: ri.Venue.Loc, Policy: ri.Policy}
	if si != nil {
		// A disabled service is not sold, whichever of its resources would deliver it.
		o.Active = o.Active && si.Service.Status != models.ResourceDisabled
		o.Service = &booking.ServiceTerms{ID: si.Service.ID, Duration: minutes(si.Service.DurationMinutes),
			Prep: minutes(si.Service.PrepMinutes), Cleanup: minutes(si.Service.CleanupMinutes), PriceCents: si.Service.PriceCents}
	}
	return o
}

func minutes(n int) time.Duration { return time.Duration(n) * time.Minute }

// Role is one role of a service that needs several resources at once: a hold takes one of its
// resources.
type Role struct {
	Role        string
	ResourceIDs []uint64
}

// Zone is the zone of venue id, in which the API answers its times; UTC for no venue (0) or one
// whose zone cannot be read.
func (c *Cache) Zone(ctx context.Context, id uint64) *time.Location {
	if id == 0 {
		return time.UTC
	}
	vi, err := c.Venue(ctx, id)
	if err != nil {
		return time.UTC
	}
	return vi.Loc
}

// PeekVenue answers venue id if the cache holds it, however old, without loading it: for
// rendering inside a transaction, which must not wait for SQL.
func (c *Cache) PeekVenue(id uint64) (*VenueInfo, bool) { return c.venues.peek(id) }

// Admin changes tell the cache what they changed once their SQL is committed: it forgets its own
// copy, and moves the catalog versions on so that every instance reads its copy again before it
// decides anything with it. An error means the versions could not be moved on (Redis did not
// answer): the change is made, but the caller must not answer it as in force everywhere.

// ChangedVenue: venue id's row changed (its name, zone or release mode).
func (c *Cache) ChangedVenue(ctx context.Context, id uint64) error {
	c.venues.forget(id)
	return c.bump(ctx, id)
}

// ChangedVenueList: a venue was added.
func (c *Cache) ChangedVenueList(ctx context.Context) error {
	c.venueIDs.forget(struct{}{})
	return c.bump(ctx, 0)
}

// ChangedResource: resource id of venueID changed (its row, schedule or booking rules).
func (c *Cache) ChangedResource(ctx context.Context, id, venueID uint64) error {
	c.resources.forget(id)
	c.policies.forget(venueID)
	return c.bump(ctx, venueID)
}

// ChangedService: service id of venueID changed.
func (c *Cache) ChangedService(ctx context.Context, id, venueID uint64) error {
	c.services.forget(id)
	return c.bump(ctx, venueID)
}

// ChangedGraces: a grace policy changed; it may apply at every venue.
func (c *Cache) ChangedGraces(ctx context.Context) error {
	c.graces.forget(struct{}{})
	return c.bumpAll(ctx)
}

// ChangedNoshowPolicy: the no-show freeze rule changed; it applies at every venue.
func (c *Cache) ChangedNoshowPolicy(ctx context.Context) error {
	c.noshow.forget(struct{}{})
	return c.bumpAll(ctx)
}

func (c *Cache) bump(ctx context.Context, venueIDs ...uint64) error {
	if c.vers == nil {
		return nil
	}
	return c.vers.BumpCatalog(ctx, venueIDs)
}

// bumpAll moves the global version on, then every venue's: the hold scripts see only a venue's, and
// a venue's read after it moved on comes with the global one moved on already.
func (c *Cache) bumpAll(ctx context.Context) error {
	if err := c.bump(ctx, 0); err != nil {
		return err
	}
	ids, err := c.ss.VenueIDs(ctx)
	if err != nil {
		return err
	}
	return c.bump(ctx, ids...)
}
