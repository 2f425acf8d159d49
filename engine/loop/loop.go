// Package loop gives every background loop of slotwheel one shape: a Config with documented
// defaults, Start and Stop, a RunOnce bounded by a timeout that tests drive directly, and the same
// metrics for all. A loop may hold a Lease so that, of many instances, one runs it at a time. It
// imports no slotwheel package.
package loop

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Func is one run of a loop's work.
type Func func(ctx context.Context) error

// Lease lets one instance at a time run a loop. Hold reports whether this instance holds it now
// (taking or renewing it for ttl); a lease whose holder died passes to another instance once ttl has
// run out.
type Lease interface {
	Hold(ctx context.Context, ttl time.Duration) (bool, error)
	Release(ctx context.Context) error
}

// Config configures a loop. Zero values take the documented defaults.
type Config struct {
	// Name labels the loop's metrics and logs. Required.
	Name string
	// Interval is the time between the starts of two runs; default 1s.
	Interval time.Duration
	// Timeout bounds one run; default 30s.
	Timeout time.Duration
	// Lease, when set, makes the loop run only on the instance that holds it; every run renews it.
	Lease Lease
	// LeaseTTL is how long the lease is held past a run: how long a dead holder keeps the loop from
	// the others; default three intervals, at least a second.
	LeaseTTL time.Duration
	// Logger receives failed runs; default slog.Default().
	Logger *slog.Logger
}

var (
	runs = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_loop_runs_total",
		Help: "Runs of a background loop, by loop and outcome (ok, error, skipped: another instance holds its lease).",
	}, []string{"loop", "outcome"})
	duration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "slotwheel_loop_run_seconds",
		Help:    "Time one run of a background loop took.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"loop"})
)

// Loop runs a Func every Interval.
type Loop struct {
	cfg  Config
	run  Func
	log  *slog.Logger
	kick chan struct{}

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}

	// timerMu guards timer, the pending KickAfter (not mu: Stop holds mu while a run finishes, and
	// a run may ask for the next one).
	timerMu sync.Mutex
	timer   *time.Timer

	// renewAt is when the lease, last taken or renewed here, is next renewed (see holdLease).
	renewAt atomic.Int64 // unix nanoseconds; 0: at the next run
}

// New builds a loop; it does not start it.
func New(cfg Config, run Func) *Loop {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = max(3*cfg.Interval, time.Second)
	}
	for _, o := range []string{"ok", "error", "skipped"} {
		runs.WithLabelValues(cfg.Name, o)
	}
	return &Loop{cfg: cfg, run: run, log: cfg.Logger.With("loop", cfg.Name), kick: make(chan struct{}, 1)}
}

// Name is the loop's name.
func (l *Loop) Name() string { return l.cfg.Name }

// Start runs the loop until Stop or until ctx ends. Starting a started loop does nothing.
func (l *Loop) Start(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return
	}
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		t := time.NewTicker(l.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				if l.cfg.Lease != nil {
					rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
					_ = l.cfg.Lease.Release(rctx)
					l.renewAt.Store(0)
					cancel()
				}
				return
			case <-t.C:
			case <-l.kick:
			}
			if err := l.RunOnce(ctx); err != nil && ctx.Err() == nil {
				l.log.Warn("loop run failed", "err", err)
			}
		}
	}()
}

// Kick asks for a run as soon as possible instead of at the next interval.
func (l *Loop) Kick() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// KickAfter asks for a run d from now, in place of an earlier KickAfter that has not fired: a loop
// whose work falls due at known times runs when it does rather than up to an interval later. The
// interval's runs go on as well.
func (l *Loop) KickAfter(d time.Duration) {
	l.timerMu.Lock()
	defer l.timerMu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
	}
	l.timer = time.AfterFunc(d, l.Kick)
}

// Stop ends the loop and waits for a run in progress.
func (l *Loop) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
	l.timerMu.Lock()
	defer l.timerMu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
	}
}

// holdLease reports whether this instance holds the loop's lease, taking or renewing it. A lease
// renewed here less than a third of its TTL ago is held without asking again: it has two thirds of
// its TTL to run, and a loop that ticks several times a TTL (the hold wheel every 100 ms on a 500 ms
// lease) spent most of an idle instance's Redis round trips renewing it.
func (l *Loop) holdLease(ctx context.Context) (bool, error) {
	now := time.Now()
	if at := l.renewAt.Load(); at != 0 && now.UnixNano() < at {
		return true, nil
	}
	held, err := l.cfg.Lease.Hold(ctx, l.cfg.LeaseTTL)
	if held && err == nil {
		l.renewAt.Store(now.Add(l.cfg.LeaseTTL / 3).UnixNano())
	} else {
		l.renewAt.Store(0)
	}
	return held, err
}

// RunOnce runs the loop's work now, bounded by Timeout (and, with a lease, only if this instance
// holds it).
func (l *Loop) RunOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	if l.cfg.Lease != nil {
		held, err := l.holdLease(ctx)
		if err != nil {
			runs.WithLabelValues(l.cfg.Name, "error").Inc()
			return err
		}
		if !held {
			runs.WithLabelValues(l.cfg.Name, "skipped").Inc()
			return nil
		}
	}
	start := time.Now()
	err := l.run(ctx)
	duration.WithLabelValues(l.cfg.Name).Observe(time.Since(start).Seconds())
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	runs.WithLabelValues(l.cfg.Name, outcome).Inc()
	return err
}
