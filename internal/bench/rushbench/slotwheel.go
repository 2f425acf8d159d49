package rushbench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/models"
)

const (
	// holdTTL outlasts any run, so that nothing sold in the rush is for sale again in the second wave.
	holdTTL    = 30 * time.Minute
	priceCents = 5000
	// asynqQueues is Asynq's set of queue names, which the binary's queues join without our prefix.
	asynqQueues  = "asynq:queues"
	asynqServers = "asynq:servers"
)

// startSlotwheel starts the binary's `all` on db and a key prefix of its own, with the settings of
// a production instance but for what would get in the rush's way (a bound on a user's holds, dev
// log-in), and creates the sale's catalog through the admin API.
func startSlotwheel(ctx context.Context, env *Env, cfg Config, db *database, secret []byte, run int) (*system, error) {
	g, err := newGrid(cfg.Slots, time.Now())
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	prefix := env.prefix() + ":bench-rush-" + randomName("", 10)
	queuesBefore, err := env.Redis.SMembers(ctx, asynqQueues).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	settings := append(slices.Clone(env.RedisEnv),
		"SLOTWHEEL_HTTP_ADDR="+addr,
		"SLOTWHEEL_MYSQL_DSN="+db.dsn,
		"SLOTWHEEL_REDIS_PREFIX="+prefix,
		"SLOTWHEEL_AUTO_MIGRATE=true",
		"SLOTWHEEL_JWT_SECRET="+string(secret),
		"SLOTWHEEL_PAYMENT_SECRET="+randomName("rush-pay-", 32),
		"SLOTWHEEL_DEV_LOGIN=false", "SLOTWHEEL_DEV_PAYMENTS=false", "SLOTWHEEL_DEMO=false",
		"SLOTWHEEL_MAX_ACTIVE_HOLDS=0", "SLOTWHEEL_RATE_LIMIT_PER_IP=0",
		"SLOTWHEEL_HOLD_TTL="+holdTTL.String())
	var pprofAddr string
	if cfg.Profile > 0 {
		if pprofAddr, err = freeAddr(); err != nil {
			return nil, err
		}
		settings = append(settings, "SLOTWHEEL_PPROF_ADDR="+pprofAddr)
	}
	c, err := startChild("slotwheel", env.Binary, []string{"all"}, childEnv(append(settings, poolSettings(env.Pool)...)...),
		logPath(env, DesignSlotwheel, run))
	if err != nil {
		return nil, err
	}
	sys := &system{child: c, base: "http://" + addr, grid: g, capacity: cfg.Capacity, pprof: pprofAddr,
		cleanup: func(ctx context.Context) error { return env.forgetSlotwheel(ctx, prefix, queuesBefore) }}
	// Asynq keeps its live servers in a ZSET scored by when each one's heartbeat lapses.
	if live, err := env.Redis.ZCount(ctx, asynqServers, strconv.FormatInt(time.Now().Unix(), 10), "+inf").Result(); err == nil && live > 0 {
		sys.note = fmt.Sprintf("%d other Asynq server(s) were live on this Redis database: the bench's instance shared its queues "+
			"(release, …) with them, and their work shared Redis's CPU; give the bench a database of its own", live)
	}
	venueID, resources, err := setupSlotwheel(ctx, sys, secret, cfg)
	if err != nil {
		return nil, errors.Join(err, sys.stop(context.WithoutCancel(ctx)))
	}
	sys.offer(resources)
	sys.check = func(ctx context.Context) (Check, error) { return slotwheelCheck(ctx, env, prefix, venueID) }
	return sys, nil
}

// setupSlotwheel waits for the instance, then creates a venue, its resources and their schedules
// through the admin API, with an admin token, as an operator would.
func setupSlotwheel(ctx context.Context, sys *system, secret []byte, cfg Config) (venueID uint64, resources []string, err error) {
	if err := sys.child.waitReady(ctx, sys.base+"/readyz"); err != nil {
		return 0, nil, err
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	admin := signToken(secret, "rush-admin", "admin", time.Now().Add(time.Hour))
	var v struct {
		ID string `json:"venue_id"`
	}
	if err := doJSON(ctx, hc, http.MethodPost, sys.base+"/api/v1/admin/venues", admin,
		map[string]any{"name": "bench rush", "timezone": benchZone}, &v); err != nil {
		return 0, nil, fmt.Errorf("create venue: %w", err)
	}
	if venueID, err = strconv.ParseUint(v.ID, 10, 64); err != nil {
		return 0, nil, fmt.Errorf("create venue: venue_id %q: %w", v.ID, err)
	}
	schedule := map[string]any{"slot_minutes": sys.grid.minutes, "horizon_days": 3,
		"weekly": []map[string]any{{"weekdays": []int{1, 2, 3, 4, 5, 6, 7}, "open": sys.grid.opens(), "close": sys.grid.closes()}}}
	for i := range cfg.Resources {
		var r struct {
			ID string `json:"resource_id"`
		}
		if err := doJSON(ctx, hc, http.MethodPost, sys.base+"/api/v1/admin/resources", admin, map[string]any{"venue_id": v.ID,
			"name": fmt.Sprintf("court %d", i+1), "kind": "court", "capacity": cfg.Capacity, "category": "rush",
			"price_cents": priceCents}, &r); err != nil {
			return 0, nil, fmt.Errorf("create resource: %w", err)
		}
		if err := doJSON(ctx, hc, http.MethodPut, sys.base+"/api/v1/admin/resources/"+r.ID+"/schedule", admin, schedule, nil); err != nil {
			return 0, nil, fmt.Errorf("schedule of resource %s: %w", r.ID, err)
		}
		resources = append(resources, r.ID)
	}
	return venueID, resources, nil
}

// slotwheelCheck reads slotwheel's own account of the sale: per slot of the venue, the units its
// Redis counters say are taken against the units the slot has.
func slotwheelCheck(ctx context.Context, env *Env, prefix string, venueID uint64) (Check, error) {
	keys := redisstore.NewKeys(prefix).Venue(venueID)
	caps, err := env.Redis.HGetAll(ctx, keys.Capacity()).Result()
	if err != nil {
		return Check{}, err
	}
	used, err := env.Redis.HGetAll(ctx, keys.Used()).Result()
	if err != nil {
		return Check{}, err
	}
	ch := Check{Source: "Redis counters: units used against capacity, per slot"}
	for field, u := range used {
		n, err := strconv.Atoi(u)
		if err != nil {
			return Check{}, fmt.Errorf("used %s = %q: %w", field, u, err)
		}
		c, _ := strconv.Atoi(caps[field]) // a slot with no capacity field is closed: 0
		ch.add(c, n)
	}
	return ch, nil
}

// forgetSlotwheel deletes the keys of a measurement's prefix, and the Asynq queues its instance
// registered that were not there before.
func (e *Env) forgetSlotwheel(ctx context.Context, prefix string, queuesBefore []string) error {
	errs := []error{e.deleteKeys(ctx, prefix+":*")}
	after, err := e.Redis.SMembers(ctx, asynqQueues).Result()
	errs = append(errs, err)
	for _, q := range after {
		if !slices.Contains(queuesBefore, q) {
			errs = append(errs, e.deleteKeys(ctx, "asynq:{"+q+"}:*"), e.Redis.SRem(ctx, asynqQueues, q).Err())
		}
	}
	return errors.Join(errs...)
}

// poolSettings size a child's MySQL pool.
func poolSettings(p models.Pool) []string {
	p = p.WithDefaults()
	return []string{fmt.Sprintf("SLOTWHEEL_MYSQL_MAX_OPEN_CONNS=%d", p.MaxOpen), fmt.Sprintf("SLOTWHEEL_MYSQL_MAX_IDLE_CONNS=%d", p.MaxIdle)}
}

// logPath is where a design's child logs in a run.
// profilePath names the CPU profile of a design's server during one wave of one run.
func profilePath(env *Env, d Design, run int, w Wave) string {
	return filepath.Join(env.LogDir, fmt.Sprintf("rush-%s-run%d-%s.pprof", d, run+1, waveTag(w)))
}

func logPath(env *Env, d Design, run int) string {
	return filepath.Join(env.LogDir, fmt.Sprintf("bench-rush-%s-run%d.log", d, run+1))
}
