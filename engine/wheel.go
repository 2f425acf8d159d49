package engine

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// WheelConfig configures the hold-expiry ticker.
type WheelConfig struct {
	// Interval between ticks; default 100ms. Availability does not depend on it (a due hold stops
	// counting at its deadline), only how soon counters and hold records catch up.
	Interval time.Duration
	// Batch bounds the holds one script pops per venue; default 500. A full batch is followed at once
	// by another.
	Batch int
	// Timeout bounds one tick; default 2s.
	Timeout time.Duration
	// SweepEvery is how often the ticker also looks for holds a dead process left CONFIRMING
	// (settling them if their booking committed, else putting them back on the wheel); default 1s.
	SweepEvery time.Duration
}

// Wheel pops due holds from every venue's wheel and gives their units back.
type Wheel struct {
	e         *Engine
	cfg       WheelConfig
	lastSweep time.Time
	cancel    context.CancelFunc
	done      chan struct{}
	once      sync.Once
}

// NewWheel builds the ticker of an engine.
func (e *Engine) NewWheel(cfg WheelConfig) *Wheel {
	setDefault(&cfg.Interval, 100*time.Millisecond)
	setDefault(&cfg.Timeout, 2*time.Second)
	setDefault(&cfg.SweepEvery, time.Second)
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	return &Wheel{e: e, cfg: cfg}
}

// Start runs the ticker until ctx ends or Stop is called.
func (w *Wheel) Start(ctx context.Context) {
	ctx, w.cancel = context.WithCancel(ctx)
	w.done = make(chan struct{})
	go func() {
		defer close(w.done)
		t := time.NewTicker(w.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := w.runOnce(ctx); err != nil && ctx.Err() == nil {
					w.e.log.Warn("wheel tick failed", "err", err)
				}
			}
		}
	}()
}

// Stop ends the ticker and waits for the running tick.
func (w *Wheel) Stop() {
	w.once.Do(func() {
		if w.cancel != nil {
			w.cancel()
			<-w.done
		}
	})
}

// RunOnce runs one tick now (for tests and tools) and says how many holds expired.
func (w *Wheel) RunOnce(ctx context.Context) (int, error) { return w.runOnce(ctx) }

func (w *Wheel) runOnce(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	start := time.Now()
	defer func() { metricWheelTick.Observe(time.Since(start).Seconds()) }()
	venues, err := w.e.venueIDs(ctx)
	if err != nil {
		return 0, err
	}
	if now := time.Now(); now.Sub(w.lastSweep) >= w.cfg.SweepEvery {
		w.lastSweep = now
		// Each step runs even when another failed: one bad row must not stop the others' work.
		for name, step := range map[string]func(context.Context) error{
			"reconcile after redis loss": w.e.reconcileIfRedisLost,
			"abandoned confirms":         func(ctx context.Context) error { return w.e.sweepConfirming(ctx, venues) },
			"waitlist promotion":         w.e.promoteWaiting,
			"booking progress":           w.e.completeFinished,
		} {
			if err := step(ctx); err != nil && ctx.Err() == nil {
				w.e.log.Warn("wheel sweep step failed", "step", name, "err", err)
			}
		}
	}
	total := 0
	for len(venues) > 0 {
		n, full, err := w.e.expireDue(ctx, venues, w.cfg.Batch)
		total += n
		if err != nil {
			return total, err
		}
		venues = full
	}
	metricExpired.Add(float64(total))
	return total, nil
}

// expireDue runs the expiry script for venues in one pipeline and returns the venues whose batch
// was full (more may be due).
func (e *Engine) expireDue(ctx context.Context, venues []uint64, batch int) (int, []uint64, error) {
	now := e.clock.Now().UnixMilli()
	k := e.keys
	run := func() ([]redis.Cmder, error) {
		pipe := e.rdb.Pipeline()
		for _, v := range venues {
			e.scripts.expireDue.EvalSha(ctx, pipe, []string{k.Wheel(v), k.Owners(v), k.Used(v)}, now, batch, keep.Milliseconds(), k.HoldPrefix(v))
		}
		return pipe.Exec(ctx)
	}
	cmds, err := run()
	// A pipeline sends EVALSHA only: the first tick (or one after Redis lost its scripts) loads
	// the script and goes again, instead of paying a SCRIPT LOAD on every tick.
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err := e.scripts.expireDue.Load(ctx, e.rdb).Err(); err != nil {
			return 0, nil, err
		}
		cmds, err = run()
	}
	if err != nil {
		return 0, nil, err
	}
	total := 0
	var full []uint64
	for i, c := range cmds {
		n, _ := c.(interface{ Int() (int, error) }).Int()
		total += n
		if n >= batch {
			full = append(full, venues[i])
		}
	}
	return total, full, nil
}

// sweepConfirming resolves holds left CONFIRMING for longer than ConfirmStaleAfter: a process died
// between marking and settling. It is what reconciliation does for them, but within a second.
func (e *Engine) sweepConfirming(ctx context.Context, venues []uint64) error {
	now := e.clock.Now()
	cutoff := strconv.FormatInt(now.Add(-e.opts.ConfirmStaleAfter).UnixMilli(), 10)
	var rep ReconcileReport
	for _, v := range venues {
		ids, err := e.rdb.ZRangeByScore(ctx, e.keys.Confirming(v), &redis.ZRangeBy{Min: "-inf", Max: cutoff, Count: 100}).Result()
		if err != nil {
			return err
		}
		for _, id := range ids {
			if err := e.repairHold(ctx, v, id, now, &rep); err != nil {
				return err
			}
		}
	}
	metricDrift.WithLabelValues("confirming_resumed").Add(float64(rep.ConfirmingResumed))
	metricDrift.WithLabelValues("holds_settled").Add(float64(rep.HoldsSettled))
	return nil
}

// reconcileIfRedisLost reconciles at once when Redis has lost its data while the process runs: the
// release tasks went with it, and the loader does not offer bookings it already queued.
func (e *Engine) reconcileIfRedisLost(ctx context.Context) error {
	n, err := e.rdb.Exists(ctx, e.keys.Alive()).Result()
	if err != nil || n == 1 {
		return err
	}
	e.log.Warn("redis lost its data; rebuilding from SQL now")
	metricDrift.WithLabelValues("redis_lost").Inc()
	// A tick's timeout is too short for a full reconciliation.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	rep, err := e.Reconcile(rctx)
	e.log.Info("rebuilt after redis data loss", "report", fmt.Sprintf("%+v", rep))
	return err
}
