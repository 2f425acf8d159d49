package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/slotwheel/slotwheel/config"
	"github.com/slotwheel/slotwheel/internal/backend"
	"github.com/slotwheel/slotwheel/internal/bench/releasebench"
	"github.com/slotwheel/slotwheel/internal/bench/rushbench"
	"github.com/slotwheel/slotwheel/models"
)

// benchRushFlags are the flags of `slotwheel bench rush`.
type benchRushFlags struct {
	cfg      rushbench.Config
	designs  string
	out      string
	binary   string
	progress bool
}

func (b *benchRushFlags) register(fs *flag.FlagSet) func() error {
	b.cfg = rushbench.DefaultConfig()
	fs.IntVar(&b.cfg.Clients, "clients", b.cfg.Clients, "clients of the rush, all asking at one instant, each with its own token and Idempotency-Key")
	fs.IntVar(&b.cfg.Resources, "resources", b.cfg.Resources, "resources on sale, in one venue")
	fs.IntVar(&b.cfg.Slots, "slots", b.cfg.Slots, "slots of each resource on the day of the sale")
	fs.IntVar(&b.cfg.Capacity, "capacity", b.cfg.Capacity, "units of each slot")
	fs.IntVar(&b.cfg.SecondWave, "second-wave", b.cfg.SecondWave, "clients asking at a second gate once everything is sold (0: none)")
	fs.IntVar(&b.cfg.Conns, "conns", b.cfg.Conns, "keep-alive connections the clients share, opened before the gate, as a load balancer keeps them")
	fs.IntVar(&b.cfg.Runs, "runs", b.cfg.Runs, "measurements of each design, pooled in the table")
	fs.Uint64Var(&b.cfg.Seed, "seed", b.cfg.Seed, "seed of the clients' choice of slot (the same choices for every design and run)")
	fs.DurationVar(&b.cfg.Timeout, "timeout", b.cfg.Timeout, "how long a client waits for its answer before it counts as an error")
	fs.StringVar(&b.designs, "designs", "slotwheel,sql", "designs to measure, comma-separated: slotwheel, sql (the plain SQL design)")
	fs.StringVar(&b.out, "out", "bench-out", "directory the JSON table, the PNG chart and the servers' logs are written to")
	fs.StringVar(&b.binary, "binary", "", "the slotwheel binary the servers run as (default: this one)")
	fs.BoolVar(&b.progress, "progress", true, "draw a progress line on stderr when it is a terminal")
	fs.DurationVar(&b.cfg.Profile, "profile", 0, "CPU-profile slotwheel's server this long from each gate on, into --out (0: no profile)")
	return func() error {
		var err error
		b.cfg.Designs, err = parseList("designs", b.designs, rushbench.Designs)
		if strings.TrimSpace(b.out) == "" {
			err = errors.Join(err, errors.New("--out must name a directory"))
		}
		return errors.Join(err, b.cfg.Validate())
	}
}

// run measures the rush through slotwheel and the plain SQL design, each a child process of this
// binary on a database of its own on the configured MySQL server (and slotwheel on a prefix of its
// own on the configured Redis), prints one table, and writes it as JSON with a PNG chart.
func (b *benchRushFlags) run(ctx context.Context, cfg *config.Config, out io.Writer, _ *slog.Logger) error {
	if cfg.MySQLDSN == "" {
		return errors.New("bench rush measures on a real MySQL-compatible server and Redis: set SLOTWHEEL_MYSQL_DSN and SLOTWHEEL_REDIS_URL")
	}
	rdb, err := backend.OpenRedis(ctx, redisOptions(cfg))
	if err != nil {
		return err
	}
	defer rdb.Close()
	if rdb.Embedded() {
		return errors.New("bench rush measures on a real Redis: set SLOTWHEEL_REDIS_URL (a database of its own, redis://host:6379/5)")
	}
	bin := b.binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return fmt.Errorf("--binary: %w", err)
		}
	}
	if err := os.MkdirAll(b.out, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	redisEnv := []string{"SLOTWHEEL_REDIS_URL=" + cfg.RedisURL, fmt.Sprintf("SLOTWHEEL_REDIS_CLUSTER=%t", cfg.RedisCluster)}
	if cfg.RedisSentinelMaster != "" {
		redisEnv = append(redisEnv, "SLOTWHEEL_REDIS_SENTINEL_MASTER="+cfg.RedisSentinelMaster,
			"SLOTWHEEL_REDIS_SENTINEL_ADDRS="+cfg.RedisSentinelAddrs)
	}
	env := &rushbench.Env{MySQLDSN: cfg.MySQLDSN, Pool: models.Pool{MaxOpen: cfg.MySQLMaxOpenConns, MaxIdle: cfg.MySQLMaxIdleConns},
		Redis: rdb.Client, RedisEnv: redisEnv, Prefix: cfg.RedisPrefix, Binary: bin, LogDir: b.out}
	var progress *releasebench.Progress
	if fi, err := os.Stderr.Stat(); err == nil && b.progress && fi.Mode()&os.ModeCharDevice != 0 {
		progress = releasebench.NewProgress(os.Stderr)
	}
	rep, runErr := rushbench.Run(ctx, env, b.cfg, progress)
	progress.Finish()
	if runErr != nil {
		runErr = fmt.Errorf("bench rush: %w", runErr)
	}
	// What was measured is written even when a measurement failed.
	if rep == nil || len(rep.Rows) == 0 {
		return runErr
	}
	err = rep.WriteTable(out)
	files, werr := rep.Write(b.out)
	if len(files) > 0 {
		fmt.Fprintf(out, "\nwrote %s\n", strings.Join(files, " and "))
	}
	err = errors.Join(err, werr)
	return errors.Join(runErr, err)
}

// runRushSQLServer is `slotwheel bench rush-sql-server`, left out of the usage: the plain SQL
// design that `bench rush` starts as a child on the database, address and secret it sets.
func runRushSQLServer(ctx context.Context, cfg *config.Config, _ io.Writer, log *slog.Logger) error {
	return rushbench.SQLServer{DSN: cfg.MySQLDSN, Addr: cfg.HTTPAddr, JWTSecret: []byte(cfg.JWTSecret),
		Pool: models.Pool{MaxOpen: cfg.MySQLMaxOpenConns, MaxIdle: cfg.MySQLMaxIdleConns}, HoldTTL: cfg.HoldTTL, Logger: log}.Run(ctx)
}
