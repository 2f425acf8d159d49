package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/slotwheel/slotwheel/config"
	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/internal/backend"
	"github.com/slotwheel/slotwheel/internal/bench/releasebench"
	"github.com/slotwheel/slotwheel/jobs"
	"github.com/slotwheel/slotwheel/models"
)

// benchReleaseFlags are the flags of `slotwheel bench release`.
type benchReleaseFlags struct {
	burst, steadyRate, steadySeconds, runs int
	busyRate, busySeconds, busyConfirmRate int
	venues, concurrency, setupWorkers      int
	designs, cases                         string
	out                                    string
	timeout                                time.Duration
	cpuProfile                             string
	cpuProfileWindow                       bool
	progress                               bool

	parsedDesigns []releasebench.Design
	parsedCases   []releasebench.Case
}

func (b *benchReleaseFlags) register(fs *flag.FlagSet) func() error {
	fs.IntVar(&b.burst, "burst", releasebench.DefaultBurst, "bookings of the burst case, all due at one instant")
	fs.IntVar(&b.steadyRate, "steady-rate", releasebench.DefaultSteadyRate, "releases per second of the steady case (release_at 1/rate s apart)")
	fs.IntVar(&b.steadySeconds, "steady-seconds", releasebench.DefaultSteadySeconds, "length of the steady case in seconds")
	fs.IntVar(&b.busyRate, "busy-rate", releasebench.DefaultBusyRate, "releases per second of the busy case (release_at 1/rate s apart)")
	fs.IntVar(&b.busySeconds, "busy-seconds", releasebench.DefaultBusySeconds, "length of the busy case in seconds")
	fs.IntVar(&b.busyConfirmRate, "busy-confirm-rate", releasebench.DefaultBusyConfirms,
		"confirms per second (each of a hold made just before it, on other slots) that run through the same deployment while the busy case's bookings fall due")
	fs.IntVar(&b.runs, "runs", 1, "measurements of each design and case, pooled in the table")
	fs.StringVar(&b.designs, "designs", "slotwheel,asynq,poll", "designs to measure, comma-separated: slotwheel, asynq (stock Asynq, default settings), poll (UPDATE every 1 s, and every 5 min computed)")
	fs.StringVar(&b.cases, "cases", strings.ReplaceAll(joinNames(releasebench.DefaultCases), " ", ""), "cases to measure, comma-separated: burst, steady, busy (steady's releases beside a confirm load)")
	fs.IntVar(&b.venues, "venues", 1, "venues slotwheel's bookings are spread over, one hall each (1: the worst case for its per-venue batches)")
	fs.IntVar(&b.concurrency, "concurrency", 0, fmt.Sprintf("slotwheel's release workers (0: jobs' default, %d)", jobs.DefaultConcurrency))
	fs.IntVar(&b.setupWorkers, "setup-workers", 0, "goroutines making bookings before a case starts (0: 16 on MySQL, 4 on SQLite)")
	fs.StringVar(&b.out, "out", "bench-out", "directory the JSON table and the PNG chart are written to")
	fs.DurationVar(&b.timeout, "timeout", releasebench.DefaultTimeout, "how long a case waits past its latest release_at before counting what is left as not released")
	fs.StringVar(&b.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (engine, worker and anchors in this process) to this file")
	fs.BoolVar(&b.cpuProfileWindow, "cpuprofile-window", false, "profile only while bookings fall due (first release_at → all seen released), "+
		"one file per measurement: --cpuprofile's name, with the design, case and run before its extension when there are several")
	fs.BoolVar(&b.progress, "progress", true, "draw a progress bar on stderr")
	return b.check
}

func (b *benchReleaseFlags) check() error {
	between := func(name string, v, lo, hi int) error {
		if v < lo || v > hi {
			return fmt.Errorf("--%s must be between %d and %d, got %d", name, lo, hi, v)
		}
		return nil
	}
	if err := errors.Join(
		between("burst", b.burst, 1, releasebench.MaxBookings),
		// release_at has millisecond precision: a thousand a second is one per millisecond.
		between("steady-rate", b.steadyRate, 1, 1000),
		between("steady-seconds", b.steadySeconds, 1, 3600),
		between("busy-rate", b.busyRate, 1, 1000),
		between("busy-seconds", b.busySeconds, 1, 3600),
		between("busy-confirm-rate", b.busyConfirmRate, 1, 10_000),
		between("runs", b.runs, 1, 100),
		between("venues", b.venues, 1, 10_000),
		between("concurrency", b.concurrency, 0, 100_000),
		between("setup-workers", b.setupWorkers, 0, 1000),
	); err != nil {
		return err
	}
	if b.steadyRate*b.steadySeconds > releasebench.MaxBookings {
		return fmt.Errorf("--steady-rate × --steady-seconds must be at most %d bookings, got %d", releasebench.MaxBookings, b.steadyRate*b.steadySeconds)
	}
	if b.busyRate*b.busySeconds > releasebench.MaxBookings {
		return fmt.Errorf("--busy-rate × --busy-seconds must be at most %d bookings, got %d", releasebench.MaxBookings, b.busyRate*b.busySeconds)
	}
	if b.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, got %s", b.timeout)
	}
	if b.cpuProfileWindow && b.cpuProfile == "" {
		return errors.New("--cpuprofile-window needs --cpuprofile")
	}
	if strings.TrimSpace(b.out) == "" {
		return errors.New("--out must name a directory")
	}
	var err error
	if b.parsedDesigns, err = parseList("designs", b.designs, releasebench.Designs); err != nil {
		return err
	}
	b.parsedCases, err = parseList("cases", b.cases, releasebench.Cases)
	return err
}

// parseList reads a comma-separated list of known names, in the order of known.
func parseList[T ~string](flagName, v string, known []T) ([]T, error) {
	var got []T
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(known, T(s)) {
			return nil, fmt.Errorf("--%s: unknown %q (known: %s)", flagName, s, joinNames(known))
		}
		got = append(got, T(s))
	}
	var out []T
	for _, k := range known {
		if slices.Contains(got, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

func joinNames[T ~string](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

// run measures no-show releases through slotwheel and its two anchors on the configured MySQL and
// Redis (or the embedded ones), prints one table, and writes it as JSON with a PNG chart of the
// lag distributions. Every measurement creates its own database and its own keys and queues (and
// removes them), so it never touches real data.
func (b *benchReleaseFlags) run(ctx context.Context, cfg *config.Config, out io.Writer, log *slog.Logger) error {
	if err := os.MkdirAll(b.out, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	rdb, err := backend.OpenRedis(ctx, redisOptions(cfg))
	if err != nil {
		return err
	}
	defer rdb.Close()
	dir, err := os.MkdirTemp("", "slotwheel-bench-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	env := &releasebench.Env{MySQLDSN: cfg.MySQLDSN, Pool: models.Pool{MaxOpen: cfg.MySQLMaxOpenConns, MaxIdle: cfg.MySQLMaxIdleConns},
		Dir: dir, Redis: rdb.Client, AsynqOpt: rdb.Asynq, Embedded: rdb.Embedded(), Prefix: cfg.RedisPrefix,
		Logger:          slog.New(warnOnly{log.Handler()}),
		NewReleaseQueue: benchReleaseQueue(rdb.Asynq), LoaderInterval: jobs.DefaultLoaderInterval}
	if b.cpuProfileWindow {
		windows := len(b.parsedDesigns) * len(b.parsedCases) * b.runs
		env.OnRelease = func(name string) func() { return b.profileWindow(name, windows, log) }
	} else if b.cpuProfile != "" {
		f, err := os.Create(b.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	var progress *releasebench.Progress
	if b.progress {
		progress = releasebench.NewProgress(os.Stderr)
	}
	rep, runErr := releasebench.Run(ctx, env, releasebench.Config{Burst: b.burst, SteadyRate: b.steadyRate,
		SteadySeconds: b.steadySeconds, BusyRate: b.busyRate, BusySeconds: b.busySeconds, BusyConfirmRate: b.busyConfirmRate, Runs: b.runs, Venues: b.venues, Designs: b.parsedDesigns, Cases: b.parsedCases,
		Concurrency: b.concurrency, SetupWorkers: b.setupWorkers, Timeout: b.timeout}, progress)
	progress.Finish()
	if runErr != nil {
		runErr = fmt.Errorf("bench release: %w", runErr)
	}
	// What was measured is written even when a measurement failed.
	if rep == nil || len(rep.Rows) == 0 {
		return runErr
	}
	jsonPath, pngPath := filepath.Join(b.out, "bench-release.json"), filepath.Join(b.out, "bench-release.png")
	err = errors.Join(rep.WriteTable(out), rep.WriteJSON(jsonPath))
	if cerr := rep.WriteChart(pngPath); cerr != nil {
		err = errors.Join(err, fmt.Errorf("chart: %w", cerr))
	}
	if err == nil {
		fmt.Fprintf(out, "\nwrote %s and %s\n", jsonPath, pngPath)
	}
	return errors.Join(runErr, err)
}

// benchReleaseQueue builds the release queue of releasebench's slotwheel design as `slotwheel all`
// builds its own (jobs' worker on the bench's Redis, leased), on queue names of the measurement's
// own.
func benchReleaseQueue(redis asynq.RedisConnOpt) func(*engine.Engine, string, int, *slog.Logger) (releasebench.ReleaseQueue, error) {
	return func(eng *engine.Engine, queue string, concurrency int, log *slog.Logger) (releasebench.ReleaseQueue, error) {
		jb, err := jobs.New(jobs.Options{Redis: redis, Engine: eng, Queue: queue, Concurrency: concurrency, Lease: eng.Lease, Logger: log})
		if err != nil {
			return nil, err
		}
		return jb, nil
	}
}

// profileWindow starts a CPU profile of one measurement's release window (see --cpuprofile-window)
// and answers what stops it. A profile that cannot be written is logged: the measurement goes on.
func (b *benchReleaseFlags) profileWindow(name string, windows int, log *slog.Logger) func() {
	path := b.cpuProfile
	if windows > 1 {
		ext := filepath.Ext(path)
		slug := strings.NewReplacer(" ", "-", ",", "").Replace(name)
		path = strings.TrimSuffix(path, ext) + "-" + slug + ext
	}
	f, err := os.Create(path)
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
		}
	}
	if err != nil {
		log.Warn("--cpuprofile-window: no profile", "measurement", name, "err", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			log.Warn("--cpuprofile-window: profile not written", "path", path, "err", err)
		}
	}
}

// warnOnly passes on warnings and errors only: the engines and workers under test log routine
// events (a release task that started early and waits) at info, which would bury the table.
type warnOnly struct{ slog.Handler }

func (h warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnOnly) WithAttrs(as []slog.Attr) slog.Handler { return warnOnly{h.Handler.WithAttrs(as)} }

func (h warnOnly) WithGroup(name string) slog.Handler { return warnOnly{h.Handler.WithGroup(name)} }
