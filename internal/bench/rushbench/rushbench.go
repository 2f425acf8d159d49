// Package rushbench measures the booking-opening rush — thousands of clients asking at one instant
// for the few units of a venue's slots — through slotwheel's hold path and through the plain SQL
// design of the seeds (per request one transaction: SELECT … FOR UPDATE of the slot, a check,
// UPDATE occupied, INSERT the hold), on the same MySQL-compatible server in the same run. Both
// designs are child processes of the slotwheel binary behind HTTP with the same token check, so
// that the CPU each one uses is its own, and the clients are this process. It serves
// `slotwheel bench rush`.
//
// It owns no rules: it drives slotwheel through its REST API only and reads slotwheel's Redis
// counters (through redisstore's key builders) only to check for oversold slots; the SQL design
// (SQLServer) uses nothing of slotwheel but models' MySQL pool. Nothing in engine, api or jobs may
// import it. Unlike engine/, it reads the wall clock: measuring wall time is what it is for.
package rushbench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slotwheel/slotwheel/internal/bench/releasebench"
)

// Design is a way of selling the slots.
type Design string

// The designs measured.
const (
	DesignSlotwheel Design = "slotwheel" // the binary's `all`: Redis gate, Lua hold script
	DesignSQL       Design = "sql"       // the seeds' plain SQL design (SQLServer)
)

// Designs lists every design, in the order of the table.
var Designs = []Design{DesignSlotwheel, DesignSQL}

// Label names the design in the table and the chart.
func (d Design) Label() string {
	if d == DesignSQL {
		return "plain SQL"
	}
	return string(d)
}

// Wave is one gate's worth of clients.
type Wave string

// The waves of a measurement: the rush itself, and the clients who come after the sell-out, all of
// whom must be refused (cheaply).
const (
	WaveRush  Wave = "rush"
	WaveAfter Wave = "after sell-out"
)

// Config sizes a run. DefaultConfig is the issue's.
type Config struct {
	Clients   int // clients of the rush, each with its own token and Idempotency-Key
	Resources int // resources of the venue
	Slots     int // slots of each resource on the sale's day
	Capacity  int // units of each slot
	// SecondWave is how many more clients ask once everything is sold; 0: no second wave.
	SecondWave int
	// Conns is the pool of keep-alive connections the clients share (see newHTTPClient).
	Conns int
	Runs  int // measurements of each design, pooled in the table
	// Seed picks the clients' slots: the same choices for every design and run.
	Seed uint64
	// Timeout bounds how long a client waits for its answer; past it, its request is an error.
	Timeout time.Duration
	Designs []Design // default: all
	// Profile, when set, is how long slotwheel's server is CPU-profiled from each gate on (its
	// pprof listener); the profiles are written beside the logs.
	Profile time.Duration
}

// Defaults of Config: the rush.
const (
	DefaultClients    = 20_000
	DefaultResources  = 20
	DefaultSlots      = 10
	DefaultCapacity   = 2
	DefaultSecondWave = 5_000
	DefaultConns      = 512
	DefaultSeed       = 1
	DefaultTimeout    = 2 * time.Minute
)

// DefaultConfig is the rush: 20,000 clients for 400 units (20 resources × 10 slots ×
// capacity 2), then 5,000 more after the sell-out, over 512 connections, once.
func DefaultConfig() Config {
	return Config{Clients: DefaultClients, Resources: DefaultResources, Slots: DefaultSlots, Capacity: DefaultCapacity,
		SecondWave: DefaultSecondWave, Conns: DefaultConns, Runs: 1, Seed: DefaultSeed, Timeout: DefaultTimeout}
}

// Validate reports every value out of range, each named as the flag of `slotwheel bench rush`
// that sets it.
func (c Config) Validate() error {
	between := func(name string, v, lo, hi int) error {
		if v < lo || v > hi {
			return fmt.Errorf("--%s must be between %d and %d, got %d", name, lo, hi, v)
		}
		return nil
	}
	errs := []error{
		between("clients", c.Clients, 1, 200_000),
		between("resources", c.Resources, 1, 500),
		between("slots", c.Slots, 1, maxSlots),
		between("capacity", c.Capacity, 1, 1000),
		between("second-wave", c.SecondWave, 0, 200_000),
		between("conns", c.Conns, 1, 4096),
		between("runs", c.Runs, 1, 100),
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout must be positive, got %s", c.Timeout))
	}
	for _, d := range c.Designs {
		if !slices.Contains(Designs, d) {
			errs = append(errs, fmt.Errorf("--designs: unknown design %q", d))
		}
	}
	return errors.Join(errs...)
}

func (c Config) designs() []Design {
	if len(c.Designs) == 0 {
		return Designs
	}
	return c.Designs
}

// units is how many units are for sale.
func (c Config) units() int { return c.Resources * c.Slots * c.Capacity }

// waves are the waves a measurement runs.
func (c Config) waves() []Wave {
	if c.SecondWave > 0 {
		return []Wave{WaveRush, WaveAfter}
	}
	return []Wave{WaveRush}
}

// clients is how many clients a wave has.
func (c Config) clients(w Wave) int {
	if w == WaveAfter {
		return c.SecondWave
	}
	return c.Clients
}

// choices are the slot each client of each wave asks for (an index into a system's targets),
// drawn from the seed, so that every design and every run faces the same rush.
func (c Config) choices() map[Wave][]int {
	r := rand.New(rand.NewPCG(c.Seed, 0x7275_7368)) // "rush"
	out := map[Wave][]int{}
	for _, w := range c.waves() {
		picks := make([]int, c.clients(w))
		for i := range picks {
			picks[i] = r.IntN(c.Resources * c.Slots)
		}
		out[w] = picks
	}
	return out
}

// Run measures every design of cfg Runs times and reports a row per design and wave, pooled over
// the runs. A measurement that fails is noted and the run goes on, so that one failure does not
// cost the others; the failures are joined into the error. Progress goes to p (nil: none).
func Run(ctx context.Context, env *Env, cfg Config, p *releasebench.Progress) (*Report, error) {
	if err := errors.Join(cfg.Validate(), env.validate()); err != nil {
		return nil, err
	}
	rep := &Report{Started: time.Now().UTC(), Backends: env.describe(ctx), Config: cfg.forReport(env.Pool),
		Host: releasebench.Host{CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Go: runtime.Version()}}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil && len(strings.Fields(string(b))) >= 3 {
		rep.Load = strings.Join(strings.Fields(string(b))[:3], " ")
		if load, err := strconv.ParseFloat(strings.Fields(rep.Load)[0], 64); err == nil && load > 0.5*float64(runtime.NumCPU()) {
			rep.Notes = append(rep.Notes, fmt.Sprintf("the machine was busy when the run began (load %.2f on %d CPUs): other work "+
				"shared the CPUs with the servers measured, and the figures vary with it", load, runtime.NumCPU()))
		}
	}
	choices := cfg.choices()
	done := map[Design][]*measurement{}
	failed := map[Design][]string{}
	var errs []error
	total, step := cfg.Runs*len(cfg.designs()), 0
	for run := range cfg.Runs {
		for _, d := range cfg.designs() {
			step++
			name := fmt.Sprintf("[%d/%d] %s", step, total, d.Label())
			if cfg.Runs > 1 {
				name += fmt.Sprintf(", run %d", run+1)
			}
			p.SetStep(name)
			m, err := measure(ctx, env, cfg, d, run, choices, p)
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			if err != nil {
				err = fmt.Errorf("%s, run %d: %w", d.Label(), run+1, err)
				errs = append(errs, err)
				failed[d] = append(failed[d], err.Error())
				continue
			}
			done[d] = append(done[d], m)
			rep.Logs = append(rep.Logs, m.logPath)
			if m.note != "" && !slices.Contains(rep.Notes, m.note) {
				rep.Notes = append(rep.Notes, m.note)
			}
		}
	}
	p.Finish()
	for _, d := range cfg.designs() {
		for _, w := range cfg.waves() {
			rep.Rows = append(rep.Rows, pool(cfg, d, w, done[d], failed[d]))
		}
		if len(done[d]) > 0 {
			rep.Checks = append(rep.Checks, poolChecks(d, done[d]))
		}
	}
	rep.CPUSources = cpuSources(done)
	rep.Goals = goals(rep, cfg)
	return rep, errors.Join(errs...)
}

// measurement is what one measurement of one design found.
type measurement struct {
	design  Design
	waves   map[Wave]*waveResult
	check   Check // the design's own account of what it sold, after every wave
	cpuNote string
	note    string // a caveat (system.note)
	logPath string
}

// measure runs one design once: its database, its child process, its catalog, the browsing
// warm-up, then each wave at a gate, its own account of what it sold, and the clean-up.
func measure(ctx context.Context, env *Env, cfg Config, d Design, run int, choices map[Wave][]int, p *releasebench.Progress) (m *measurement, err error) {
	p.Stage("starting", 0)
	db, err := env.newDatabase(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, db.drop(context.WithoutCancel(ctx))) }()
	secret := []byte(randomName("rush-secret-", 32))
	var sys *system
	switch d {
	case DesignSlotwheel:
		sys, err = startSlotwheel(ctx, env, cfg, db, secret, run)
	case DesignSQL:
		sys, err = startSQL(ctx, env, cfg, db, secret, run)
	default:
		err = fmt.Errorf("unknown design %q", d)
	}
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, sys.stop(context.WithoutCancel(ctx))) }()

	hc := newHTTPClient(cfg.Conns, cfg.Timeout)
	defer hc.CloseIdleConnections()
	p.Stage("browsing (warm-up)", 0)
	if err := sys.browse(ctx, hc, cfg); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	meter := newCPUMeter(ctx, env, db, sys.child.pid())
	m = &measurement{design: d, waves: map[Wave]*waveResult{}, cpuNote: meter.note, note: sys.note, logPath: sys.child.logPath}
	sold := make([]int, cfg.Resources*cfg.Slots)
	for _, w := range cfg.waves() {
		calls := sys.calls(secret, fmt.Sprintf("%s-r%d-%s", d, run+1, waveTag(w)), choices[w])
		// A breath between the warm-up (or the last wave) and the gate, so that what the server
		// does after answering is not counted against the wave.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		before := meter.read(ctx)
		p.Stage(string(w), len(calls))
		profiled := sys.profile(ctx, cfg.Profile, profilePath(env, d, run, w))
		answers := fire(ctx, hc, sys.base, calls, cfg.Conns, p)
		if err := <-profiled; err != nil {
			m.note = strings.TrimPrefix(m.note+"; profile: "+err.Error(), "; ")
		}
		res := &waveResult{wave: w, clients: len(calls), answers: answers, cpu: meter.read(ctx).since(before)}
		res.oversold = countSales(answers, sold, cfg.Capacity)
		m.waves[w] = res
	}
	p.Stage("checking the server's account", 0)
	if m.check, err = sys.check(ctx); err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	m.check.Design, m.check.Label, m.check.Sales = d, d.Label(), 0
	for _, r := range m.waves {
		m.check.Sales += r.sales()
	}
	return m, nil
}

func waveTag(w Wave) string {
	if w == WaveAfter {
		return "after"
	}
	return "rush"
}
