// Package catalog caches what the hold path reads of the catalog on every request — venues with
// their zones, resources with their parsed schedules and booking rules, services, grace and no-show
// policies — so that a hold costs Redis only, and answers from a stale copy while MySQL is down. The
// catalog's admin changes (engine.Catalog) write SQL and tell the cache what to forget.
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

// cacheTTL bounds how stale another instance's view of an admin change can be; this instance
// forgets its own entries on every change it makes.
const cacheTTL = 5 * time.Second

// Cache caches what the hold path reads on every request — venues, resources with their parsed
// schedules, services and grace policies — so that a hold costs Redis only. When SQL does not answer,
// an expired entry is served anyway: holds and availability of loaded days keep working through a
// MySQL outage (docs/API.md "Outages"), and the Cache changes only through admin calls, which
// need MySQL themselves.
type Cache struct {
	ss    *sqlstore.Store
	clock clock.Clock

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

// New builds a cache over ss; clk says when entries go stale.
func New(ss *sqlstore.Store, clk clock.Clock) *Cache {
	c := &Cache{ss: ss, clock: clk}
	h := &sqlHealth{}
	c.venues.health, c.resources.health, c.services.health, c.graces.health = h, h, h, h
	c.venueIDs.health, c.policies.health, c.noshow.health = h, h, h
	return c
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

// Venue answers venue id.
func (c *Cache) Venue(ctx context.Context, id uint64) (*VenueInfo, error) {
	return c.venues.get(ctx, c.clock.Now(), id, func(ctx context.Context) (*VenueInfo, error) {
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
	return c.resources.get(ctx, c.clock.Now(), id, func(ctx context.Context) (*ResourceInfo, error) {
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
	return c.services.get(ctx, c.clock.Now(), id, func(ctx context.Context) (*ServiceInfo, error) {
		s, links, err := c.ss.Service(ctx, id)
		if err != nil {
			return nil, err
		}
		return ServiceInfoOf(s, links), nil
	})
}

// Grace answers the grace policies by category.
func (c *Cache) Grace(ctx context.Context) (map[string]booking.Grace, error) {
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

// VenuePolicies answers the booking rules of a venue's resources; a resource missing from the map
// has the defaults.
func (c *Cache) VenuePolicies(ctx context.Context, venueID uint64) (map[uint64]booking.Policy, error) {
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
	return c.noshow.get(ctx, c.clock.Now(), struct{}{}, func(ctx context.Context) (booking.NoshowPolicy, error) {
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
		_, _ = c.venues.get(ctx, c.clock.Now(), v.ID, func(context.Context) (*VenueInfo, error) { return info, nil })
	}
	return errors.Join(err1, err2, err3, err4)
}

// VenueList lists every venue id; the wheel ticks over it.
func (c *Cache) VenueList(ctx context.Context) ([]uint64, error) {
	return c.venueIDs.get(ctx, c.clock.Now(), struct{}{}, func(ctx context.Context) ([]uint64, error) { return c.ss.VenueIDs(ctx) })
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

// The Forget methods drop what an admin change made wrong, so that this instance's next read
// loads it again; other instances see the change within cacheTTL.

// ForgetVenue forgets venue id.
func (c *Cache) ForgetVenue(id uint64) { c.venues.forget(id) }

// ForgetVenueList forgets the list of venues.
func (c *Cache) ForgetVenueList() { c.venueIDs.forget(struct{}{}) }

// ForgetResource forgets resource id and the booking rules of its venue's resources.
func (c *Cache) ForgetResource(id, venueID uint64) {
	c.resources.forget(id)
	c.policies.forget(venueID)
}

// ForgetGraces forgets the grace policies.
func (c *Cache) ForgetGraces() { c.graces.forget(struct{}{}) }

// ForgetNoshowPolicy forgets the no-show freeze rule.
func (c *Cache) ForgetNoshowPolicy() { c.noshow.forget(struct{}{}) }

// ForgetService forgets service id.
func (c *Cache) ForgetService(id uint64) { c.services.forget(id) }
