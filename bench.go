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
	"time"

	"github.com/slotwheel/slotwheel/config"
	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/internal/backend"
	"github.com/slotwheel/slotwheel/internal/bench"
)

// benchFlags are the flags of `slotwheel bench`.
type benchFlags struct {
	d       time.Duration
	workers int
	spread  int
}

func (b *benchFlags) register(fs *flag.FlagSet) func() error {
	fs.DurationVar(&b.d, "duration", 3*time.Second, "how long each measurement runs")
	fs.IntVar(&b.workers, "workers", 32, "concurrent callers")
	fs.IntVar(&b.spread, "resources", 1000, "resources the second case spreads holds over")
	return func() error {
		if b.d <= 0 || b.workers <= 0 || b.spread < 2 {
			return errors.New("--duration and --workers must be positive, --resources at least 2")
		}
		return nil
	}
}

// benchEnv lets config accept a run without real secrets: bench signs nothing.
func benchEnv(k string) (string, bool) {
	if v, ok := os.LookupEnv(k); ok || (k != "SLOTWHEEL_JWT_SECRET" && k != "SLOTWHEEL_PAYMENT_SECRET") {
		return v, ok
	}
	return "bench-signs-nothing-0123456789abcdef", true
}

// run measures holds per second through the engine against the bare hold script on the
// configured Redis (or the embedded one), in one run, and prints the ratio. Its catalog lives in a
// throw-away SQLite file and its keys under "<prefix>:bench-<time>", so it never touches real data.
func (b *benchFlags) run(ctx context.Context, cfg *config.Config, out io.Writer, _ *slog.Logger) error {
	rdb, err := backend.OpenRedis(ctx, redisOptions(cfg))
	if err != nil {
		return err
	}
	defer rdb.Close()
	dir, err := os.MkdirTemp("", "slotwheel-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sql, err := openSQL(ctx, &config.Config{SQLitePath: filepath.Join(dir, "bench.db")}, true, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer sql.Close()
	fmt.Fprintf(out, "holds/s with %d workers for %s per measurement (redis: %s)\n", b.workers, b.d, redisOptions(cfg).Describe())
	fmt.Fprintf(out, "%-16s %12s %12s %8s\n", "case", "bare script", "engine", "ratio")
	// Each measurement gets a fresh fixture under its own keys, so neither path runs against sets
	// the other one filled.
	measure := func(n int, op func(f *bench.Fixture) func(context.Context, uint64) error) (float64, error) {
		prefix := fmt.Sprintf("%s:bench-%d", cfg.RedisPrefix, time.Now().UnixNano())
		e, err := engine.New(engine.Options{DB: sql.db, Redis: rdb.Client, Prefix: prefix, HoldTTL: time.Hour})
		if err != nil {
			return 0, err
		}
		f, err := bench.NewFixture(ctx, e, rdb.Client, prefix, n)
		if err != nil {
			return 0, err
		}
		if !rdb.Embedded() {
			defer func() { _ = f.Cleanup(context.WithoutCancel(ctx)) }()
		}
		return bench.Rate(ctx, b.d, b.workers, op(f))
	}
	for _, n := range []int{1, b.spread} {
		bare, err := measure(n, func(f *bench.Fixture) func(context.Context, uint64) error { return f.BareHold })
		if err != nil {
			return err
		}
		eng, err := measure(n, func(f *bench.Fixture) func(context.Context, uint64) error { return f.EngineHold })
		if err != nil {
			return err
		}
		name := "hot slot"
		if n > 1 {
			name = fmt.Sprintf("%d resources", n)
		}
		fmt.Fprintf(out, "%-16s %12.0f %12.0f %7.0f%%\n", name, bare, eng, 100*eng/bare)
	}
	return nil
}
