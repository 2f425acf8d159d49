package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/backend"
	"github.com/slotwheel/slotwheel/engine/enginebench"
)

// bench measures holds per second through the engine against the bare hold script on the
// configured Redis (or the embedded one), in one run, and prints the ratio. Its catalog lives in a
// throw-away SQLite file and its keys under "<prefix>:bench-<time>", so it never touches real data.
func bench(ctx context.Context, redisURL, prefix string, d time.Duration, workers, spread int, out io.Writer) error {
	rdb, err := backend.OpenRedis(ctx, redisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	dir, err := tempDir()
	if err != nil {
		return err
	}
	db, err := backend.OpenSQL("", filepath.Join(dir, "bench.db"))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "holds/s with %d workers for %s per measurement (redis: %s)\n", workers, d, describeRedis(redisURL))
	fmt.Fprintf(out, "%-16s %12s %12s %8s\n", "case", "bare script", "engine", "ratio")
	// Each measurement gets a fresh fixture under its own keys, so neither path runs against sets
	// the other one filled.
	measure := func(n int, op func(f *enginebench.Fixture) func(context.Context, uint64) error) (float64, error) {
		keyPrefix := fmt.Sprintf("%s:bench-%d", prefix, time.Now().UnixNano())
		if !rdb.Embedded() {
			defer cleanup(ctx, rdb, keyPrefix)
		}
		e, err := engine.New(engine.Options{DB: db, Redis: rdb.Client, Prefix: keyPrefix, HoldTTL: time.Hour})
		if err != nil {
			return 0, err
		}
		f, err := enginebench.NewFixture(ctx, e, rdb.Client, n)
		if err != nil {
			return 0, err
		}
		return enginebench.Rate(ctx, d, workers, op(f))
	}
	script := engine.HoldScriptForBenchmark()
	for _, n := range []int{1, spread} {
		bare, err := measure(n, func(f *enginebench.Fixture) func(context.Context, uint64) error {
			return func(ctx context.Context, i uint64) error { return f.BareHold(ctx, script, i) }
		})
		if err != nil {
			return err
		}
		eng, err := measure(n, func(f *enginebench.Fixture) func(context.Context, uint64) error { return f.EngineHold })
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

func describeRedis(url string) string {
	if url == "" {
		return "embedded"
	}
	return "SLOTWHEEL_REDIS_URL"
}

// cleanup deletes the run's keys from a real Redis.
func cleanup(ctx context.Context, rdb *backend.Redis, prefix string) {
	iter := rdb.Client.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Client.Del(ctx, iter.Val())
	}
}

func tempDir() (string, error) { return os.MkdirTemp("", "slotwheel-bench-") }
