// Package releasebench measures how late no-show releases land — released_at − release_at, as
// written in SQL — through slotwheel's own path (an engine, its loops and jobs' Asynq worker, on
// MySQL and Redis) and through the two designs slotwheel is compared with, on the same backends in
// the same run: stock Asynq with default settings (one task per booking, one UPDATE per task), and
// a polling UPDATE (every second, measured; every five minutes, computed). It serves
// `slotwheel bench release` and the Go benchmarks.
//
// It owns no rules: it drives engine's public API and the release queue its caller injects
// (Env.NewReleaseQueue: jobs' worker, which the CLI builds), and the anchors use nothing of
// slotwheel but the backends. It does not import jobs; no production path but the CLI should
// import it. Unlike engine/, it reads the wall clock (time.Now): measuring wall time is what it is
// for.
package releasebench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"
)

// Design is a way of releasing no-shows.
type Design string

// The designs measured.
const (
	DesignSlotwheel Design = "slotwheel" // engine + loops + jobs, as `slotwheel all` runs them
	DesignAsynq     Design = "asynq"     // stock Asynq, default settings, one task and one UPDATE per booking
	DesignPoll      Design = "poll"      // a polling UPDATE of every due booking
)

// Designs lists every design, in the order of the table.
var Designs = []Design{DesignSlotwheel, DesignAsynq, DesignPoll}

// Case is a pattern of release_at values.
type Case string

// The cases measured.
const (
	CaseBurst  Case = "burst"  // every booking due at the same instant (a whole second, as start + grace is)
	CaseSteady Case = "steady" // release_at spread evenly, one booking every 1/rate seconds
	// CaseBusy spreads release_at evenly as steady does, while customers hold and confirm other
	// slots through the same deployment at a steady rate (see confirmLoad).
	CaseBusy Case = "busy"
)

// Cases lists every case, in the order of the table.
var Cases = []Case{CaseBurst, CaseSteady, CaseBusy}

// DefaultCases are the cases a Config without Cases measures, and the CLI's default.
var DefaultCases = []Case{CaseBurst, CaseSteady}

// Config sizes a run. Zero values take the defaults, which are the issue's: a 10,000-booking burst,
// 1,000 releases per second for 60 s, and 750 releases per second for 13 s (about 10,000) while
// 750 confirms a second run.
type Config struct {
	Burst         int // bookings of the burst; default 10,000
	SteadyRate    int // releases per second of the steady case; default 1,000 (1 ms apart)
	SteadySeconds int // length of the steady case; default 60
	BusyRate      int // releases per second of the busy case; default 750
	BusySeconds   int // length of the busy case; default 13
	// BusyConfirmRate is the busy case's confirms per second, each of a hold made just before it;
	// default 750.
	BusyConfirmRate int
	Runs            int // measurements of each design and case, pooled; default 1
	// Venues spread slotwheel's bookings over that many venues (one hall each); default 1, the
	// worst case for slotwheel, which releases a venue's due bookings in batches. The anchors have
	// no venues.
	Venues  int
	Designs []Design
	Cases   []Case
	// Concurrency is slotwheel's release workers (jobs.Options.Concurrency); 0 keeps jobs' default.
	Concurrency int
	// SetupWorkers make bookings at once; default 16 on MySQL, 4 on SQLite (one writer).
	SetupWorkers int
	// Timeout bounds the wait past the latest release_at; default 5 minutes. Bookings still
	// CONFIRMED then are reported as not released.
	Timeout time.Duration
	// PollPeriod is the measured poll's period; default 1 s. ComputedPeriod is the computed one's;
	// default 5 minutes.
	PollPeriod     time.Duration
	ComputedPeriod time.Duration
}

// Defaults of Config.
const (
	DefaultBurst          = 10_000
	DefaultSteadyRate     = 1_000
	DefaultSteadySeconds  = 60
	DefaultBusyRate       = 750
	DefaultBusySeconds    = 13
	DefaultBusyConfirms   = 750
	DefaultTimeout        = 5 * time.Minute
	DefaultPollPeriod     = time.Second
	DefaultComputedPeriod = 5 * time.Minute
)

// MaxBookings bounds the bookings of one case: they all take units of one slot, whose capacity is
// at most 1,000,000, and a run must stay a run.
const MaxBookings = 900_000

func (c Config) withDefaults(env *Env) Config {
	setInt := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	setInt(&c.Burst, DefaultBurst)
	setInt(&c.SteadyRate, DefaultSteadyRate)
	setInt(&c.SteadySeconds, DefaultSteadySeconds)
	setInt(&c.BusyRate, DefaultBusyRate)
	setInt(&c.BusySeconds, DefaultBusySeconds)
	setInt(&c.BusyConfirmRate, DefaultBusyConfirms)
	setInt(&c.Runs, 1)
	setInt(&c.Venues, 1)
	workers := 16
	if env.MySQLDSN == "" {
		workers = 4
	}
	setInt(&c.SetupWorkers, workers)
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.PollPeriod <= 0 {
		c.PollPeriod = DefaultPollPeriod
	}
	if c.ComputedPeriod <= 0 {
		c.ComputedPeriod = DefaultComputedPeriod
	}
	if len(c.Designs) == 0 {
		c.Designs = Designs
	}
	if len(c.Cases) == 0 {
		c.Cases = DefaultCases
	}
	return c
}

// label names design d on case k in the table and the chart.
func (c Config) label(d Design, k Case) string {
	switch d {
	case DesignSlotwheel:
		if v := min(c.Venues, c.spec(k).n); v > 1 {
			return fmt.Sprintf("slotwheel, %d venues", v)
		}
		return "slotwheel"
	case DesignAsynq:
		return "stock Asynq, defaults"
	case DesignPoll:
		return "poll UPDATE every " + c.PollPeriod.String()
	}
	return string(d)
}

// spec is one case's bookings: how many, and the offset of each one's release_at from the first.
type spec struct {
	c      Case
	n      int
	offset func(i int) time.Duration
	// wholeSecond puts the first release_at on a whole second, as slot grids and whole-second
	// graces do (it is also the one instant at which Asynq's whole-second schedule is exact).
	wholeSecond bool
	// window, when set, is called as the bookings start falling due; what it returns, when they
	// are all seen released (or the wait ends). See Env.OnRelease.
	window func() (end func())
}

func (c Config) spec(k Case) spec {
	if k == CaseBurst {
		return spec{c: k, n: c.Burst, offset: func(int) time.Duration { return 0 }, wholeSecond: true}
	}
	rate, seconds := c.SteadyRate, c.SteadySeconds
	if k == CaseBusy {
		rate, seconds = c.BusyRate, c.BusySeconds
	}
	return spec{c: k, n: rate * seconds, offset: func(i int) time.Duration { return time.Duration(i) * time.Second / time.Duration(rate) }}
}

// loadDuration is how long a busy case's confirm load may run: from loadLead before the first
// release_at to loadTail after the latest (what sizes its slots).
func (c Config) loadDuration() time.Duration {
	return loadLead + time.Duration(c.BusySeconds)*time.Second + loadTail
}

// releaseAts are the release_at values of a case whose first is first.
func (s spec) releaseAts(first time.Time) []time.Time {
	out := make([]time.Time, s.n)
	for i := range out {
		out[i] = first.Add(s.offset(i)).Truncate(time.Millisecond)
	}
	return out
}

// plan picks the first release_at of a case whose bookings are made at rate per second from now,
// and whose setup then takes extra: after setup is over, so that the measurement starts only
// then. The rate is estimated from a short sample and falls as the tables grow, so the plan leaves
// room for twice the estimate.
func (s spec) plan(now time.Time, rate float64, extra time.Duration) time.Time {
	est := time.Duration(float64(s.n) / max(rate, 1) * float64(time.Second))
	first := now.Add(2*est + extra + 750*time.Millisecond)
	if s.wholeSecond {
		first = first.Truncate(time.Second).Add(time.Second)
	}
	return first.Truncate(time.Millisecond)
}

// Run measures every design of cfg on every case, Runs times each, and reports one row per design,
// case and (for the poll) period. A measurement that fails leaves a failed row and the run goes
// on, so that one failure does not cost the others; the failures are joined into the error.
// Progress goes to p (nil: none).
func Run(ctx context.Context, env *Env, cfg Config, p *Progress) (*Report, error) {
	cfg = cfg.withDefaults(env)
	rep := &Report{Started: time.Now().UTC(), Backends: env.Describe(ctx), Config: cfg.forReport(),
		Host: Host{CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Go: runtime.Version()}}
	total := len(cfg.Cases) * len(cfg.Designs) * cfg.Runs
	step := 0
	var errs []error
	for _, k := range cfg.Cases {
		for _, d := range cfg.Designs {
			var runs [][]*measurement
			for r := range cfg.Runs {
				step++
				name := fmt.Sprintf("%s %s", d, k)
				if cfg.Runs > 1 {
					name += fmt.Sprintf(", run %d", r+1)
				}
				p.SetStep(fmt.Sprintf("[%d/%d] %s", step, total, name))
				ms, err := measure(ctx, env, cfg, d, k, name, p)
				if ctx.Err() != nil {
					return rep, ctx.Err()
				}
				if err != nil {
					err = fmt.Errorf("%s %s: %w", d, k, err)
					errs = append(errs, err)
					rep.Rows = append(rep.Rows, Row{Design: d, Label: cfg.label(d, k), Case: k, Failed: true, Note: err.Error()})
					continue
				}
				runs = append(runs, ms)
			}
			if len(runs) == 0 {
				continue
			}
			for i := range runs[0] {
				var same []*measurement
				for _, ms := range runs {
					same = append(same, ms[i])
				}
				rep.Rows = append(rep.Rows, pool(same))
			}
		}
	}
	p.Finish()
	rep.Goals = goals(rep, cfg)
	return rep, errors.Join(errs...)
}

// Measure runs design d on case k once and returns its rows (the poll gives two: its measured
// period and its computed one). For the Go benchmarks.
func Measure(ctx context.Context, env *Env, cfg Config, d Design, k Case) ([]Row, error) {
	cfg = cfg.withDefaults(env)
	ms, err := measure(ctx, env, cfg, d, k, fmt.Sprintf("%s %s", d, k), nil)
	if err != nil {
		return nil, err
	}
	rows := make([]Row, len(ms))
	for i, m := range ms {
		rows[i] = pool([]*measurement{m})
	}
	return rows, nil
}

// measure runs design d on case k once; name names the measurement (for Env.OnRelease).
func measure(ctx context.Context, env *Env, cfg Config, d Design, k Case, name string, p *Progress) ([]*measurement, error) {
	s := cfg.spec(k)
	if env.OnRelease != nil {
		s.window = func() func() { return env.OnRelease(name) }
	}
	switch d {
	case DesignSlotwheel:
		m, err := measureSlotwheel(ctx, env, cfg, s, p)
		return []*measurement{m}, err
	case DesignAsynq:
		m, err := measureAsynq(ctx, env, cfg, s, p)
		return []*measurement{m}, err
	case DesignPoll:
		return measurePoll(ctx, env, cfg, s, p)
	}
	return nil, fmt.Errorf("unknown design %q", d)
}

// measurement is what one measurement of one design found.
type measurement struct {
	design   Design
	label    string
	c        Case
	computed bool
	n        int
	released int
	// lags are released_at − release_at of the released bookings, sorted (for a computed row, an
	// even sample of its distribution, and maxLag the exact maximum).
	lags   []time.Duration
	maxLag time.Duration
	early  int
	// last is the latest released_at minus the latest release_at, as written.
	last time.Duration
	// observed is when every booking was seen RELEASED by polling SQL, and unitsBack when every
	// unit was seen free again in Redis, both after the latest release_at; negative: not seen.
	observed, unitsBack time.Duration
	perSecond           float64 // bookings per second from the first release_at until observed
	redisBytes          float64 // Redis bytes per booking; negative: not measured
	setupPerSecond      float64
	note                string
	// load is what the busy case's confirm load achieved (nil in the other cases); contention
	// what the process waited for while the bookings fell due (nil for a computed row).
	load       *LoadStats
	contention *Contention
}

// finish sorts the lags and counts the early ones.
func (m *measurement) finish() {
	slices.Sort(m.lags)
	m.released = len(m.lags)
	m.early = 0
	for _, l := range m.lags {
		if l < 0 {
			m.early++
		}
	}
	if len(m.lags) > 0 {
		m.maxLag = m.lags[len(m.lags)-1]
	}
}
