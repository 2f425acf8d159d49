// Package jobs owns slotwheel's durable timers and background work on Asynq: a release task per
// booking whose release_at comes within the horizon, a reminder before it, the loader that brings
// due-soon bookings in from SQL, and the periodic reconciliation. Handlers are thin: they decode ids
// and call one engine method; the rules live in engine/. It imports engine and must never import api/.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/slotwheel/slotwheel/engine"
)

// Options configure Jobs. Zero values take the documented defaults.
type Options struct {
	// Redis is where Asynq keeps its queues. Required.
	Redis asynq.RedisConnOpt
	// Engine runs the releases and reconciliations. Required.
	Engine *engine.Engine

	// Queue names the release queue; default "release". Reconciliation, reminders and notifications
	// go to Queue+"_maint", so that tests sharing one Redis can use unique names.
	Queue string
	// Horizon is how far ahead of release_at the loader queues a release task; default 1h. It should
	// equal the engine's ReleaseHorizon.
	Horizon time.Duration
	// ReminderLead is how long before release_at the owner is reminded; default 15m.
	ReminderLead time.Duration
	// LoaderInterval is how often the loader looks for bookings coming within the horizon; default 1s.
	LoaderInterval time.Duration
	// ReconcileEvery is the period of the reconciliation; default 1h.
	ReconcileEvery time.Duration
	// Concurrency is the number of tasks one instance runs at once; default 64. Release handlers start
	// up to two seconds early and wait out the rest, so a worker is held about 1.5 s per release:
	// size it at twice the peak releases per second.
	Concurrency int
	// Logger receives the handlers' logs and Asynq's warnings; default slog.Default().
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultQueue          = "release"
	DefaultHorizon        = time.Hour
	DefaultReminderLead   = 15 * time.Minute
	DefaultLoaderInterval = time.Second
	DefaultReconcileEvery = time.Hour
	DefaultConcurrency    = 64
)

// Jobs is slotwheel's task queue: it implements engine.ReleaseScheduler for the engine and, once
// started, runs the Asynq worker, the loader and the periodic reconciliation.
type Jobs struct {
	opts      Options
	eng       *engine.Engine
	log       *slog.Logger
	client    *asynq.Client
	inspector *asynq.Inspector
	handlers  *handlers
	server    *asynq.Server
	loader    *loader
	periodic  *periodic

	mu      sync.Mutex
	started bool
	stopped bool
}

// Compile-time check that Jobs is what the engine needs.
var _ engine.ReleaseScheduler = (*Jobs)(nil)

// New builds Jobs. It opens Redis connections lazily and starts nothing; call Start to run the
// worker, or use it only as the engine's ReleaseScheduler (an API-only instance). Stop releases it.
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
	if strings.TrimSpace(opts.Queue) != opts.Queue {
		return nil, fmt.Errorf("jobs: queue name %q has surrounding spaces", opts.Queue)
	}
	setDefault(&opts.Horizon, DefaultHorizon)
	setDefault(&opts.ReminderLead, DefaultReminderLead)
	setDefault(&opts.LoaderInterval, DefaultLoaderInterval)
	setDefault(&opts.ReconcileEvery, DefaultReconcileEvery)
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	log := opts.Logger.With("component", "jobs")
	j := &Jobs{
		opts:      opts,
		eng:       opts.Engine,
		log:       log,
		client:    asynq.NewClient(opts.Redis),
		inspector: asynq.NewInspector(opts.Redis),
		handlers:  &handlers{rel: opts.Engine, rec: opts.Engine, clock: opts.Engine.Clock(), log: log},
	}
	j.loader = newLoader(loaderConfig{
		Interval: opts.LoaderInterval,
		Horizon:  opts.Horizon,
	}, opts.Engine, j, opts.Engine.Clock(), log)
	j.periodic = newPeriodic(opts.ReconcileEvery, j.enqueueReconcile, opts.Engine.Clock(), log)
	return j, nil
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// ReleaseQueue is the name of the queue release tasks go to.
func (j *Jobs) ReleaseQueue() string { return j.opts.Queue }

// MaintQueue is the name of the queue of reconciliation, reminders and notifications.
func (j *Jobs) MaintQueue() string { return j.opts.Queue + "_maint" }

// serverConfig tunes Asynq for second-level precision: scheduled tasks are forwarded every 100 ms
// and idle workers look for work every 50 ms, so a release task starts within ~150 ms of its
// (whole-second) scheduled time.
func (j *Jobs) serverConfig() asynq.Config {
	return asynq.Config{
		Concurrency:              j.opts.Concurrency,
		Queues:                   map[string]int{j.ReleaseQueue(): 10, j.MaintQueue(): 1},
		DelayedTaskCheckInterval: 100 * time.Millisecond,
		TaskCheckInterval:        50 * time.Millisecond,
		RetryDelayFunc:           retryDelay,
		IsFailure:                isFailure,
		ErrorHandler:             asynq.ErrorHandlerFunc(j.logTaskError),
		ShutdownTimeout:          10 * time.Second,
		Logger:                   slogAdapter{j.log},
		LogLevel:                 asynq.WarnLevel,
	}
}

// logTaskError logs a failed task run; Asynq retries it (or archives it when retries run out).
func (j *Jobs) logTaskError(ctx context.Context, t *asynq.Task, err error) {
	retried, _ := asynq.GetRetryCount(ctx)
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	id, _ := asynq.GetTaskID(ctx)
	level := slog.LevelWarn
	if _, early := errors.AsType[*engine.NotDueError](err); early {
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
	mux.HandleFunc(TypeRemind, h.remind)
	mux.HandleFunc(TypeReconcile, h.reconcile)
	return mux
}

// Start runs the Asynq worker, the loader and the periodic reconciliation until Stop (or until ctx
// ends, for the loader and the reconciliation). It may be called once.
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
	j.loader.Start(ctx)
	j.periodic.Start(ctx)
	return nil
}

// Stop stops the loader and the reconciliation, then shuts the worker down gracefully — it waits
// (up to ShutdownTimeout) for running handlers, and Asynq puts back any it had to interrupt, so no
// task is lost — and closes the Redis connections. After Stop, ScheduleRelease fails. It is safe to
// call more than once and without Start.
func (j *Jobs) Stop() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.stopped {
		return
	}
	j.stopped = true
	if j.started {
		j.loader.Stop()
		j.periodic.Stop()
		j.server.Shutdown()
	}
	if err := j.client.Close(); err != nil {
		j.log.Warn("close asynq client", "err", err)
	}
	if err := j.inspector.Close(); err != nil {
		j.log.Warn("close asynq inspector", "err", err)
	}
}
