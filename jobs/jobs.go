// Package jobs owns slotwheel's durable timers on Asynq: a release task per booking whose
// release_at comes within the horizon, spread over one or more release queues; the loader that
// brings due-soon bookings in from SQL; and the periodic reconciliation. Handlers are thin: they
// decode ids and call one engine method; the rules live in engine/. It imports engine and must never
// import api/.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/loop"
	"github.com/slotwheel/slotwheel/engine/release"
)

// Options configure Jobs. Zero values take the documented defaults.
type Options struct {
	// Redis is where Asynq keeps its queues. Required.
	Redis asynq.RedisConnOpt
	// Engine runs the releases and reconciliations. Required.
	Engine *engine.Engine

	// Queue names the release queue; default "release". With Shards > 1 the release tasks spread
	// over Queue, Queue_1, …, Queue_<Shards-1> by booking id, so that in a Redis Cluster (one queue =
	// one slot) no single master carries every release. Reconciliation goes to Queue+"_maint".
	Queue string
	// Shards is the number of release queues; default 1.
	Shards int
	// LoaderInterval is how often the loader looks for bookings coming within the horizon; default
	// 10s. A booking made within the horizon is queued by its confirm, so the loader only brings in
	// those that come within it as time passes, an hour ahead by default.
	LoaderInterval time.Duration
	// ReconcileEvery is the period of the reconciliation; default 1h.
	ReconcileEvery time.Duration
	// Concurrency is the number of tasks one instance runs at once; default 64. A release task
	// whose booking the release loop has decided ends after one read; one left undecided waits up
	// to a second for the loop before acting.
	Concurrency int
	// ForwardInterval is how often Asynq moves the tasks whose time has come (scheduled ones, and
	// retries) into their queues; default 2s. Each look costs two round trips per queue, and an idle
	// instance pays them all the time (1 s costs an idle instance about a third more CPU). Little
	// waits on it: the release loop releases at release_at (its tasks are the backstop) and the relay
	// makes each delivery's first attempt; but with FetchInterval it bounds a webhook's first retry
	// (3 s after the failure, engine/notify), which docs/API.md promises within 10 s: 3 s + 1 s
	// (whole-second scheduling) + 2 s + 1.5 s at worst, leaving the attempt itself 2.5 s.
	ForwardInterval time.Duration
	// FetchInterval is how long Asynq's worker waits, on average (half to one and a half of it),
	// before it looks at its queues again once it found them all empty; default 1s. Each look costs a
	// round trip per queue. A task queued for now (an unpaid hold's order close, due within 10 s; a
	// refund, within 15 s) waits for it at most; a worker that finds work looks again at once.
	FetchInterval time.Duration
	// Lease, when set, makes the loader run on one instance at a time.
	Lease func(name string) loop.Lease
	// Logger receives the handlers' logs and Asynq's warnings; default slog.Default().
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultQueue           = "release"
	DefaultLoaderInterval  = 10 * time.Second
	DefaultReconcileEvery  = time.Hour
	DefaultConcurrency     = 64
	DefaultForwardInterval = 2 * time.Second
	DefaultFetchInterval   = time.Second
)

// Jobs is slotwheel's task queue: it implements release.Scheduler for the engine and, once
// started, runs the Asynq worker, the loader and the periodic reconciliation.
type Jobs struct {
	opts      Options
	eng       *engine.Engine
	log       *slog.Logger
	client    *asynq.Client
	inspector *asynq.Inspector
	rdb       redis.UniversalClient
	handlers  *handlers
	server    *asynq.Server
	loops     []*loop.Loop

	mu      sync.Mutex
	started bool
	stopped bool
}

// Compile-time checks that Jobs is what the engine needs.
var (
	_ release.Scheduler        = (*Jobs)(nil)
	_ engine.DeliveryScheduler = (*Jobs)(nil)
)

// New builds Jobs. It opens Redis connections lazily and starts nothing; call Start to run the
// worker, or use it only as the engine's release.Scheduler (an API-only instance). Stop releases it.
func New(opts Options) (*Jobs, error) {
	if opts.Redis == nil {
		return nil, errors.New("jobs: Redis is required")
	}
	if opts.Engine == nil {
		return nil, errors.New("jobs: Engine is required")
	}
	if opts.Queue == "" {
		opts.Queue = DefaultQueue
	}
	if strings.TrimSpace(opts.Queue) != opts.Queue || strings.ContainsAny(opts.Queue, "{}") {
		return nil, fmt.Errorf("jobs: queue name %q has spaces or braces", opts.Queue)
	}
	if opts.Shards <= 0 {
		opts.Shards = 1
	}
	setDefault(&opts.LoaderInterval, DefaultLoaderInterval)
	setDefault(&opts.ReconcileEvery, DefaultReconcileEvery)
	setDefault(&opts.ForwardInterval, DefaultForwardInterval)
	setDefault(&opts.FetchInterval, DefaultFetchInterval)
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	log := opts.Logger.With("component", "jobs")
	rdb, ok := opts.Redis.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return nil, errors.New("jobs: the Redis options make no go-redis client")
	}
	j := &Jobs{
		opts:      opts,
		eng:       opts.Engine,
		log:       log,
		client:    asynq.NewClient(opts.Redis),
		inspector: asynq.NewInspector(opts.Redis),
		rdb:       rdb,
		handlers:  &handlers{rel: opts.Engine, rec: opts.Engine, notify: opts.Engine, pay: opts.Engine, log: log},
	}
	ld := &loader{horizon: opts.Engine.ReleaseHorizon(), src: opts.Engine, sched: j, clock: opts.Engine.Clock(), batch: 500, maxBatches: 20}
	lc := withLease(opts.Lease, loop.Config{Name: "release_loader", Interval: opts.LoaderInterval, Timeout: 30 * time.Second, Logger: log})
	rec := &reconcileEnqueuer{every: opts.ReconcileEvery, enqueue: j.enqueueReconcile, clock: opts.Engine.Clock()}
	// The enqueuer runs as each period begins (and a second after a failed enqueue); its interval
	// is only the bound of its sleep.
	var recLoop *loop.Loop
	recLoop = loop.New(loop.Config{Name: "reconcile_enqueuer", Interval: reconcileMaxSleep, Timeout: 10 * time.Second, Logger: log},
		func(ctx context.Context) error {
			err := rec.runOnce(ctx)
			recLoop.KickAfter(rec.wait(err))
			return err
		})
	recLoop.KickAfter(reconcileRetry) // the first run, once started: it notes the period it started in
	j.loops = []*loop.Loop{
		loop.New(lc, func(ctx context.Context) error { _, err := ld.runOnce(ctx); return err }),
		recLoop,
		loop.New(loop.Config{Name: "queue_registry", Interval: 5 * time.Second, Timeout: 5 * time.Second, Logger: log}, j.registerQueues),
		loop.New(withLease(opts.Lease, loop.Config{Name: "archived_releases", Interval: 5 * time.Second, Timeout: 30 * time.Second, Logger: log}), j.resolveArchived),
	}
	return j, nil
}

// withLease gives a loop the lease of its name, when leases are in use.
func withLease(lease func(string) loop.Lease, c loop.Config) loop.Config {
	if lease != nil {
		c.Lease = lease(c.Name)
	}
	return c
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// ReleaseQueue is the name of the first release queue.
func (j *Jobs) ReleaseQueue() string { return j.opts.Queue }

// ReleaseQueues lists every release queue.
func (j *Jobs) ReleaseQueues() []string {
	out := []string{j.opts.Queue}
	for i := 1; i < j.opts.Shards; i++ {
		out = append(out, j.opts.Queue+"_"+strconv.Itoa(i))
	}
	return out
}

// Queues lists every queue of these Jobs; the engine watches them for data loss.
func (j *Jobs) Queues() []string { return append(j.ReleaseQueues(), j.MaintQueue(), j.NotifyQueue()) }

// queueOf is the release queue of a booking.
func (j *Jobs) queueOf(bookingID uint64) string {
	if j.opts.Shards == 1 {
		return j.opts.Queue
	}
	return j.ReleaseQueues()[bookingID%uint64(j.opts.Shards)]
}

// MaintQueue is the name of the reconciliation queue.
func (j *Jobs) MaintQueue() string { return j.opts.Queue + "_maint" }

// serverConfig tunes Asynq's polling: scheduled tasks are forwarded every ForwardInterval, and
// idle workers look for work about every FetchInterval, so a release task starts within a few
// seconds of its (whole-second) scheduled time. The tasks are the retrying backstop of work that is
// done on time without them — the release loop releases at release_at, the relay makes each
// delivery's first attempt — so their latency is worth less than what polling costs an idle
// instance: those polls were most of its Redis commands.
func (j *Jobs) serverConfig() asynq.Config {
	queues := map[string]int{j.MaintQueue(): 1, j.NotifyQueue(): 5}
	for _, q := range j.ReleaseQueues() {
		queues[q] = 10
	}
	return asynq.Config{
		Concurrency:              j.opts.Concurrency,
		Queues:                   queues,
		DelayedTaskCheckInterval: j.opts.ForwardInterval,
		TaskCheckInterval:        j.opts.FetchInterval,
		RetryDelayFunc:           retryDelay,
		IsFailure:                isFailure,
		ErrorHandler:             asynq.ErrorHandlerFunc(j.logTaskError),
		// Release handlers wait at most a few seconds; a SIGTERM must end the process within 5 s.
		ShutdownTimeout: 3 * time.Second,
		Logger:          slogAdapter{j.log},
		LogLevel:        asynq.WarnLevel,
	}
}

// logTaskError logs a failed task run; Asynq retries it (or archives it when retries run out).
func (j *Jobs) logTaskError(ctx context.Context, t *asynq.Task, err error) {
	retried, _ := asynq.GetRetryCount(ctx)
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	id, _ := asynq.GetTaskID(ctx)
	level := slog.LevelWarn
	if _, early := errors.AsType[*booking.NotDueError](err); early {
		level = slog.LevelInfo
	}
	j.log.Log(ctx, level, "task failed", "type", t.Type(), "task_id", id, "retried", retried,
		"max_retry", maxRetry, "err", err)
}

// mux routes every task type jobs/ knows to its handler.
func (j *Jobs) mux() *asynq.ServeMux {
	h := j.handlers
	mux := asynq.NewServeMux()
	mux.HandleFunc(TypeRelease, h.release)
	mux.HandleFunc(TypeReconcile, h.reconcile)
	mux.HandleFunc(TypeDeliver, h.deliver)
	mux.HandleFunc(TypeCloseOrder, h.closeOrder)
	mux.HandleFunc(TypeSendRefund, h.sendRefund)
	return mux
}

// Start runs the Asynq worker, the loader and the periodic reconciliation until Stop (or until ctx
// ends, for the loops). It may be called once.
func (j *Jobs) Start(ctx context.Context) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.started || j.stopped {
		return errors.New("jobs: already started or stopped")
	}
	j.server = asynq.NewServer(j.opts.Redis, j.serverConfig())
	if err := j.server.Start(j.mux()); err != nil {
		return fmt.Errorf("jobs: start worker: %w", err)
	}
	j.started = true
	for _, l := range j.loops {
		l.Start(ctx)
	}
	return nil
}

// registerQueues makes sure Asynq's list of queues names ours. Asynq adds a queue to it only on a
// process's first enqueue, so after Redis lost its data the dashboard would list nothing (and 500
// "queue not found") although the tasks are back.
func (j *Jobs) registerQueues(ctx context.Context) error {
	qs := j.Queues()
	members := make([]any, len(qs))
	for i, q := range qs {
		members[i] = q
	}
	return j.rdb.SAdd(ctx, "asynq:queues", members...).Err()
}

// Stop stops the loops, then shuts the worker down gracefully — it waits (up to ShutdownTimeout)
// for running handlers, and Asynq puts back any it had to interrupt, so no task is lost — and closes
// the Redis connections. After Stop, ScheduleRelease fails. It is safe to call more than once and
// without Start.
func (j *Jobs) Stop() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.stopped {
		return
	}
	j.stopped = true
	if j.started {
		for _, l := range j.loops {
			l.Stop()
		}
		j.server.Shutdown()
	}
	for name, c := range map[string]interface{ Close() error }{"client": j.client, "inspector": j.inspector, "redis": j.rdb} {
		if err := c.Close(); err != nil {
			j.log.Warn("close asynq "+name, "err", err)
		}
	}
}

// runLoop runs the loop named name once (for tests).
func (j *Jobs) runLoop(ctx context.Context, name string) error {
	for _, l := range j.loops {
		if l.Name() == name {
			return l.RunOnce(ctx)
		}
	}
	return fmt.Errorf("no loop %q", name)
}
