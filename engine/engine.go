// Package engine assembles slotwheel's capability services on its stores (internal/redisstore,
// internal/sqlstore): catalog, holds, bookings, payments, notifications and upkeep (each a type beside
// its methods, assembled in engine.go), and releases (engine/release); the rules they apply live in engine/booking and are not restated here,
// this package decides the order of I/O around them. It never calls time.Now (a clock.Clock is injected)
// and must not import api/ or jobs/: the release queue reaches it through release.Scheduler.
package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/catalog"
	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/engine/idem"
	"github.com/slotwheel/slotwheel/engine/loop"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/engine/replica"
	"github.com/slotwheel/slotwheel/engine/wechatpay"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
)

// Options configure an Engine. Zero durations take the documented defaults.
type Options struct {
	DB *gorm.DB
	// ReleaseDB, when set, is a small pool to the same database that the release path uses alone,
	// so that releases do not wait for connections behind holds and confirms (backend.ReleasePool).
	ReleaseDB *gorm.DB
	// Replicas, when set, serve the reads README's routing table names as replica-safe (the lists);
	// every other read stays on DB (backend.OpenReplicas).
	Replicas *replica.Set
	Redis    redis.UniversalClient
	Prefix   string      // every Redis key starts with it; default "sw"
	Clock    clock.Clock // default clock.Real

	HoldTTL        time.Duration // unpaid hold lifetime; default 10m
	DefaultGrace   time.Duration // grace when no policy matches; default 15m
	ReleaseHorizon time.Duration // how far ahead release tasks are queued; default 1h
	RestoreWindow  time.Duration // how long after release the owner may restore; default 30m
	CheckinOpens   time.Duration // how long before start check-in opens; default 30m
	ReminderLead   time.Duration // reminder this long before release_at; default 15m; negative: none
	// ReleaseMode is the release mode of venues that set none; default on.
	ReleaseMode booking.ReleaseMode
	// MaxActiveHolds bounds a user's unpaid holds at one venue; 0 means no bound.
	MaxActiveHolds int
	// RateLimitPerIP bounds the requests of one client address per second, counted in Redis so that
	// every instance enforces the same number; 0 means no bound.
	RateLimitPerIP int
	// ConfirmStaleAfter is how long a hold may stay CONFIRMING before the wheel and reconciliation
	// assume the confirming process died; default 10s, twice the commit's timeout (confirmTimeout).
	ConfirmStaleAfter time.Duration
	// QueueTags are the hash tags of the release queues whose loss Redis-loss detection watches;
	// default {"release"}.
	QueueTags []string
	// ErasureKey keys the pseudonyms of erased users (see booking.Pseudonym): a secret of the
	// deployment, the same on every instance and kept across restarts, so that a repeated erasure
	// finds what the first one did. Empty keys them with the empty key, which hides nothing from
	// whoever knows a user's id; set it in production.
	ErasureKey []byte

	// Notify configures the sinks events are delivered to.
	Notify NotifyOptions
	// Refunds sends refunds to the payment provider that can take them; nil leaves every refund
	// requested for manual handling (with WechatPay set, its refund API is used).
	Refunds RefundProvider
	// WechatPay is the WeChat Pay client; nil turns WeChat Pay off.
	WechatPay *wechatpay.Client

	Scheduler release.Scheduler // may be nil (no queue: the overdue sweep releases)
	Logger    *slog.Logger
}

// Engine is slotwheel's booking engine: the assembly of its capability services, whose methods it
// offers as its own. Each service names the stores, settings and other services it uses in its own
// type, beside its methods (Catalog in catalog.go, Holds in holds.go, Bookings in bookings.go,
// Payments in confirm.go, Notifications in deliver.go, Upkeep in reconcile.go); releases are a
// service of their own package (engine/release, releases.go). It is safe for concurrent use.
type Engine struct {
	*Catalog
	*Holds
	*Bookings
	*Payments
	*Notifications
	*Upkeep
	// releases is the release service (engine/release), built in assembleReleases; Engine offers
	// its entry points (releases.go).
	releases *release.Service

	opts  Options
	rules booking.Rules
	clock clock.Clock
	log   *slog.Logger
	rs    *redisstore.Store
	ss    *sqlstore.Store
	cat   *catalog.Cache
	hooks *testHooks
	token string    // this instance's lease token
	tasks TaskQueue // the task queue, as the back office sees it; nil until SetScheduler gives one
}

// The engine's Prometheus metrics are declared beside the capability that counts them (holds.go,
// confirm.go, deliver.go, ...). They are package-level so that several engines in one process
// (tests) share one registration, and every label value they can take is registered up front in an
// init beside them, so that a dashboard or an alert sees a zero rather than nothing.

// New builds an Engine. It does not touch the backends; call Reconcile at start-up to rebuild Redis
// from SQL.
func New(opts Options) (*Engine, error) {
	if opts.DB == nil || opts.Redis == nil {
		return nil, errors.New("engine: DB and Redis are required")
	}
	if opts.Prefix == "" {
		opts.Prefix = "sw"
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	setDefault(&opts.HoldTTL, 10*time.Minute)
	setDefault(&opts.DefaultGrace, 15*time.Minute)
	setDefault(&opts.ReleaseHorizon, time.Hour)
	setDefault(&opts.RestoreWindow, 30*time.Minute)
	setDefault(&opts.CheckinOpens, 30*time.Minute)
	if opts.ReminderLead == 0 {
		opts.ReminderLead = 15 * time.Minute
	}
	setDefault(&opts.ConfirmStaleAfter, 2*confirmTimeout)
	setDefault(&opts.Notify.Retention, 7*24*time.Hour)
	if opts.ReleaseMode == "" {
		opts.ReleaseMode = booking.ReleaseOn
	}
	if opts.Refunds == nil && opts.WechatPay != nil {
		opts.Refunds = wechatRefunds{opts.WechatPay}
	}
	if len(opts.QueueTags) == 0 {
		opts.QueueTags = []string{"release"}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	clk := msClock{opts.Clock}
	e := &Engine{
		opts:  opts,
		rules: booking.Rules{RestoreWindow: opts.RestoreWindow, CheckinOpens: opts.CheckinOpens},
		clock: clk,
		log:   opts.Logger,
		rs:    redisstore.New(opts.Redis, opts.Prefix),
		hooks: &testHooks{},
		token: newClaimToken(),
	}
	// The store renders events with ev, and the catalog's cache ev reads from is built on the store:
	// ev gets the cache once both exist, before anything is rendered.
	ev := &events{log: opts.Logger}
	e.ss = sqlstore.New(opts.DB, ev.renderChange)
	if opts.ReleaseDB != nil {
		e.ss.UseForReleases(opts.ReleaseDB)
	}
	if opts.Replicas != nil {
		e.ss.UseReplicas(opts.Replicas)
	}
	e.ss.SetRefundRenderer(ev.refundEvent)
	e.ss.OnLedgerDrift(func(slots int) {
		metricLedgerDrift.Add(float64(slots))
		e.log.Warn("a booking change gave back units the capacity ledger did not count; reconciliation repairs the ledger", "slots", slots)
	})
	e.cat = catalog.New(e.ss, clk, e.rs)
	ev.cat = e.cat
	e.assemble(ev, idem.NewRedis(opts.Redis, opts.Prefix, clk))
	e.SetScheduler(opts.Scheduler)
	return e, nil
}

// assemble builds the services, each with what it names, and wires each to the ones it uses.
func (e *Engine) assemble(ev *events, holdIdem *idem.Redis) {
	o := e.opts
	freed := &freedBus{}
	e.Catalog = &Catalog{clock: e.clock, log: e.log, ss: e.ss, rs: e.rs, cat: e.cat,
		defaultGrace: o.DefaultGrace, defaultMode: o.ReleaseMode}
	e.Holds = &Holds{clock: e.clock, log: e.log, ss: e.ss, rs: e.rs, cat: e.cat, events: ev, freed: freed,
		holdTTL: o.HoldTTL, maxActiveHolds: o.MaxActiveHolds, rateLimitPerIP: o.RateLimitPerIP,
		confirmStaleAfter: o.ConfirmStaleAfter, holdIdem: holdIdem}
	e.Bookings = &Bookings{clock: e.clock, log: e.log, ss: e.ss, rs: e.rs, cat: e.cat, events: ev, freed: freed,
		hooks: e.hooks, rules: e.rules, releaseHorizon: o.ReleaseHorizon, reminderLead: o.ReminderLead,
		confirmStaleAfter: o.ConfirmStaleAfter, erasureKey: o.ErasureKey}
	e.Payments = &Payments{clock: e.clock, log: e.log, ss: e.ss, rs: e.rs, cat: e.cat, events: ev, hooks: e.hooks,
		confirmStaleAfter: o.ConfirmStaleAfter, refunds: o.Refunds, wechatPay: o.WechatPay}
	e.Notifications = &Notifications{clock: e.clock, log: e.log, ss: e.ss, cat: e.cat, events: ev, hooks: e.hooks,
		notify: o.Notify}
	e.Upkeep = &Upkeep{clock: e.clock, log: e.log, ss: e.ss, rs: e.rs, cat: e.cat, lease: e.Lease,
		confirmStaleAfter: o.ConfirmStaleAfter, releaseHorizon: o.ReleaseHorizon, wechatPay: o.WechatPay}
	e.Catalog.bookings, e.Catalog.holds = e.Bookings, e.Holds
	e.Holds.bookings, e.Holds.catalog, e.Holds.payments, e.Holds.upkeep = e.Bookings, e.Catalog, e.Payments, e.Upkeep
	e.Bookings.catalog, e.Bookings.holds, e.Bookings.payments, e.Bookings.upkeep = e.Catalog, e.Holds, e.Payments, e.Upkeep
	e.Payments.bookings, e.Payments.catalog, e.Payments.holds, e.Payments.upkeep = e.Bookings, e.Catalog, e.Holds, e.Upkeep
	e.Upkeep.bookings, e.Upkeep.catalog, e.Upkeep.payments = e.Bookings, e.Catalog, e.Payments
	freed.subscribe(e.Holds.reactToFreed)
	e.releases = e.assembleReleases(freed)
	e.Holds.releases, e.Upkeep.releases = e.releases, e.releases
}

// SetScheduler wires the release queue after construction (the queue's handlers need the engine).
// A scheduler that lists its queues (Queues() []string) has them watched for data loss. Call it
// before the loops start.
func (e *Engine) SetScheduler(s release.Scheduler) {
	e.Bookings.sched, e.Payments.sched, e.Notifications.sched, e.Upkeep.sched = s, s, s, s
	if q, ok := s.(interface{ Queues() []string }); ok {
		e.opts.QueueTags = q.Queues()
	}
	e.Upkeep.queueTags = e.opts.QueueTags
	if q, ok := s.(TaskQueue); ok {
		e.tasks = q
	}
}

// Clock returns the engine's clock.
func (e *Engine) Clock() clock.Clock { return e.clock }

// ReleaseHorizon is how far ahead of release_at a booking's release task is queued (by its confirm,
// and by the release queue's loader for the rest).
func (e *Engine) ReleaseHorizon() time.Duration { return e.opts.ReleaseHorizon }

// Rules returns the rules the engine applies.
func (e *Engine) Rules() booking.Rules { return e.rules }

// msClock truncates to milliseconds, the precision of DATETIME(3) and of Redis scores, so that a
// time the engine computes compares equal to the same time read back from either store.
type msClock struct{ c clock.Clock }

func (m msClock) Now() time.Time { return m.c.Now().UTC().Truncate(time.Millisecond) }

func setDefault(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// Lease returns the lease of the background work named name for this instance (see engine/loop):
// with it, one instance at a time runs that work, and another takes over when it dies.
func (e *Engine) Lease(name string) loop.Lease { return e.rs.Lease(name, e.token) }

// Ready checks that both backends answer.
func (e *Engine) Ready(ctx context.Context) error {
	if err := e.ss.Ping(ctx); err != nil {
		return err
	}
	return e.rs.Ping(ctx)
}
