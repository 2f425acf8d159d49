// Package engine owns slotwheel's booking rules: inventory and holds in Redis (one Lua script per
// operation), durable bookings in SQL through models/, the guarded state machine, the hold-expiry
// wheel and reconciliation. It never calls time.Now (a Clock is injected) and must not import api/ or
// jobs/: the release queue reaches it through the ReleaseScheduler interface.
package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
)

// Options configure an Engine. Zero durations take the documented defaults.
type Options struct {
	DB     *gorm.DB
	Redis  redis.UniversalClient
	Prefix string // every Redis key starts with it; default "sw"
	Clock  Clock  // default RealClock

	HoldTTL        time.Duration // unpaid hold lifetime; default 10m
	DefaultGrace   time.Duration // grace when no policy matches; default 15m
	ReleaseHorizon time.Duration // how far ahead release tasks are queued; default 1h
	RestoreWindow  time.Duration // how long after release the owner may restore; default 30m
	CheckinOpens   time.Duration // how long before start check-in opens; default 30m
	// ConfirmStaleAfter is how long a hold may stay CONFIRMING before the wheel and reconciliation
	// assume the confirming process died; default 10s, twice the commit's timeout (confirmTimeout).
	ConfirmStaleAfter time.Duration

	Scheduler ReleaseScheduler // may be nil (no queue: reconciliation releases)
	Logger    *slog.Logger
}

// Engine is slotwheel's booking engine. It is safe for concurrent use.
type Engine struct {
	db      *gorm.DB
	rdb     redis.UniversalClient
	keys    Keys
	clock   Clock
	opts    Options
	log     *slog.Logger
	sched   ReleaseScheduler
	scripts *scripts
	mysql   bool

	cacheMu sync.RWMutex
	cache   map[uint64]*resourceInfo
	venues  map[uint64]*venueInfo
	svc     map[uint64]*serviceInfo
	grace   map[string]*gracePolicy
	graceAt time.Time

	venueList   []uint64
	venueListAt time.Time

	hooks testHooks
}

// testHooks let tests inject failures at the steps DESIGN.md orders; nil in production.
type testHooks struct {
	// beforeCommit runs after a hold is marked confirming and before its booking commits. An error
	// fails the confirm; errSimulatedCrash makes it stop as a killed process would, undoing nothing.
	beforeCommit func(holdID string) error
	// afterCommit runs after the booking committed and before the hold is settled; only
	// errSimulatedCrash is meaningful (the process dies with the booking durable).
	afterCommit func(holdID string) error
}

// errSimulatedCrash stands for a process killed mid-operation (tests only).
var errSimulatedCrash = errors.New("simulated crash")

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
		opts.Clock = RealClock{}
	}
	setDefault(&opts.HoldTTL, 10*time.Minute)
	setDefault(&opts.DefaultGrace, 15*time.Minute)
	setDefault(&opts.ReleaseHorizon, time.Hour)
	setDefault(&opts.RestoreWindow, 30*time.Minute)
	setDefault(&opts.CheckinOpens, 30*time.Minute)
	setDefault(&opts.ConfirmStaleAfter, 2*confirmTimeout)
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	e := &Engine{
		db:      opts.DB,
		rdb:     opts.Redis,
		keys:    NewKeys(opts.Prefix),
		clock:   msClock{opts.Clock},
		opts:    opts,
		log:     opts.Logger,
		sched:   opts.Scheduler,
		scripts: loadScripts(),
		mysql:   opts.DB.Dialector.Name() == "mysql",
		cache:   map[uint64]*resourceInfo{},
		venues:  map[uint64]*venueInfo{},
		svc:     map[uint64]*serviceInfo{},
	}
	return e, nil
}

// SetScheduler wires the release queue after construction (the queue's handlers need the engine).
func (e *Engine) SetScheduler(s ReleaseScheduler) { e.sched = s }

// Clock returns the engine's clock.
func (e *Engine) Clock() Clock { return e.clock }

// Keys returns the engine's Redis keyspace.
func (e *Engine) Keys() Keys { return e.keys }

// msClock truncates to milliseconds, the precision of DATETIME(3) and of Redis scores, so that a
// time the engine computes compares equal to the same time read back from either store.
type msClock struct{ c Clock }

func (m msClock) Now() time.Time { return m.c.Now().UTC().Truncate(time.Millisecond) }

func setDefault(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// tx runs fn in a transaction at READ COMMITTED on MySQL (SQLite serialises anyway).
func (e *Engine) tx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	var opts *sql.TxOptions
	if e.mysql {
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	return e.db.WithContext(ctx).Transaction(fn, opts)
}

// Ready checks that both backends answer.
func (e *Engine) Ready(ctx context.Context) error {
	sqlDB, err := e.db.DB()
	if err != nil {
		return fmt.Errorf("sql: %w", err)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("sql: %w", err)
	}
	if err := e.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// backendErr maps an infrastructure failure to ErrUnavailable while keeping the cause for logs;
// domain errors pass through untouched.
func backendErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := AsError(err); ok {
		return err
	}
	return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
}
