// Command slotwheel runs the booking engine: the REST API, the release worker and the hold-expiry
// wheel, together (`all`, the default) or apart (`serve`, `worker`), plus `migrate` and `reconcile`.
// With no MySQL or Redis configured it runs embedded (SQLite file, in-process Redis) for trying out.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/slotwheel/slotwheel/api"
	"github.com/slotwheel/slotwheel/config"
	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/backend"
	"github.com/slotwheel/slotwheel/jobs"
)

const usage = `slotwheel — sells time slots without overselling, expires unpaid holds on the second and
releases no-shows at start + grace.

Usage: slotwheel [command] [--config file.yaml]

Commands:
  all        API, worker and wheel in one process (the default)
  serve      the REST API only
  worker     the release worker, loader, reconciliation and hold-expiry wheel only
  migrate    create or upgrade the SQL schema, then exit
  reconcile  repair Redis and the queue from SQL once, print what was repaired, then exit
  bench      holds per second through the engine against the bare Lua script, on the configured
             Redis (or the embedded one); catalog in a throw-away SQLite file, keys under a bench prefix

Settings come from SLOTWHEEL_* environment variables (see README.md) or a YAML file; the
environment wins. Without SLOTWHEEL_MYSQL_DSN and SLOTWHEEL_REDIS_URL it runs embedded.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := run(ctx, os.Args[1:], os.Stdout, log); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "slotwheel:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer, log *slog.Logger) error {
	cmd := "all"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "all", "serve", "worker", "migrate", "reconcile", "bench":
	case "help":
		fmt.Fprint(out, usage)
		return nil
	default:
		return fmt.Errorf("unknown command %q (try --help)", cmd)
	}
	fs := flag.NewFlagSet("slotwheel "+cmd, flag.ContinueOnError)
	fs.SetOutput(out)
	cfgPath := fs.String("config", "", "YAML file with settings (the environment wins)")
	var benchFor time.Duration
	var benchWorkers, benchSpread int
	if cmd == "bench" {
		fs.DurationVar(&benchFor, "duration", 3*time.Second, "how long each measurement runs")
		fs.IntVar(&benchWorkers, "workers", 32, "concurrent callers")
		fs.IntVar(&benchSpread, "resources", 1000, "resources the second case spreads holds over")
	}
	fs.Usage = func() {
		fmt.Fprint(out, usage)
		fmt.Fprintf(out, "\nFlags of %s:\n", cmd)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (try --help)", fs.Arg(0))
	}
	env := os.LookupEnv
	if cmd == "bench" {
		// bench signs nothing: placeholder secrets keep config from asking for real ones.
		env = func(k string) (string, bool) {
			if v, ok := os.LookupEnv(k); ok || (k != "SLOTWHEEL_JWT_SECRET" && k != "SLOTWHEEL_PAYMENT_SECRET") {
				return v, ok
			}
			return "unused-by-bench", true
		}
	}
	cfg, err := config.Load(*cfgPath, env)
	if err != nil {
		return err
	}
	if cmd == "bench" {
		if benchFor <= 0 || benchWorkers <= 0 || benchSpread < 2 {
			return fmt.Errorf("--duration and --workers must be positive, --resources at least 2")
		}
		return bench(ctx, cfg.RedisURL, cfg.RedisPrefix, benchFor, benchWorkers, benchSpread, out)
	}
	if err := cfg.FillEmbeddedSecrets(); err != nil {
		return err
	}
	log.Info("configuration", "settings", cfg.Masked())
	if cfg.EmbeddedSQL() || cfg.EmbeddedRedis() {
		log.Warn("EMBEDDED MODE: in-process Redis and/or SQLite — for trying slotwheel, not for production",
			"embedded_redis", cfg.EmbeddedRedis(), "embedded_sql", cfg.EmbeddedSQL())
	}

	db, err := backend.OpenSQL(cfg.MySQLDSN, cfg.SQLitePath)
	if err != nil {
		return err
	}
	if cmd == "migrate" {
		fmt.Fprintln(out, "schema is up to date")
		return nil
	}
	rdb, err := backend.OpenRedis(ctx, cfg.RedisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()

	eng, err := engine.New(engine.Options{
		DB: db, Redis: rdb.Client, Prefix: cfg.RedisPrefix, Logger: log,
		HoldTTL: cfg.HoldTTL, DefaultGrace: cfg.DefaultGrace, ReleaseHorizon: cfg.ReleaseHorizon,
		RestoreWindow: cfg.RestoreWindow, CheckinOpens: cfg.CheckinOpens,
	})
	if err != nil {
		return err
	}
	jb, err := jobs.New(jobs.Options{Redis: rdb.Asynq, Engine: eng, Horizon: cfg.ReleaseHorizon,
		ReminderLead: cfg.ReminderLead, Logger: log})
	if err != nil {
		return err
	}
	eng.SetScheduler(jb)

	// Start-up reconciliation rebuilds Redis from SQL: an embedded Redis is empty at every start,
	// and the same code recovers a production Redis that lost its data.
	rep, err := eng.Reconcile(ctx)
	if err != nil {
		return fmt.Errorf("start-up reconciliation: %w", err)
	}
	log.Info("reconciled", "report", fmt.Sprintf("%+v", rep))
	if cmd == "reconcile" {
		fmt.Fprintf(out, "%+v\n", rep)
		jb.Stop()
		return nil
	}
	if cfg.Demo {
		v, created, err := eng.EnsureDemo(ctx)
		if err != nil {
			return fmt.Errorf("demo venue: %w", err)
		}
		log.Info("demo venue", "venue_id", v.ID, "created", created)
	}

	var wheel *engine.Wheel
	if cmd == "all" || cmd == "worker" {
		if err := jb.Start(ctx); err != nil {
			return err
		}
		defer jb.Stop()
		wheel = eng.NewWheel(engine.WheelConfig{})
		wheel.Start(ctx)
		defer wheel.Stop()
	}
	if cmd == "worker" {
		log.Info("worker running")
		<-ctx.Done()
		log.Info("shutting down")
		return nil
	}
	return serve(ctx, cfg, eng, rdb, out, log)
}

// serve runs the API (and a separate metrics listener when configured) until ctx ends, then drains.
func serve(ctx context.Context, cfg *config.Config, eng *engine.Engine, rdb *backend.Redis, out io.Writer, log *slog.Logger) error {
	handler, err := api.New(api.Options{
		Engine: eng, JWTSecret: []byte(cfg.JWTSecret), PaymentSecret: []byte(cfg.PaymentSecret),
		DevLogin: cfg.DevLogin, DevPayments: cfg.DevPayments,
		WechatAppID: cfg.WechatAppID, WechatSecret: cfg.WechatSecret, WechatAPIBase: cfg.WechatAPIBase,
		DashboardUser: cfg.DashboardUser, DashboardPassword: cfg.DashboardPassword,
		Asynq: rdb.Asynq, MetricsOnAPI: cfg.MetricsAddr == "", Logger: log,
	})
	if err != nil {
		return err
	}
	if c, ok := handler.(interface{ Close() }); ok {
		defer c.Close() // the dashboard's Redis connections
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	servers := []*http.Server{{Handler: handler, ReadHeaderTimeout: 10 * time.Second}}
	listeners := []net.Listener{ln}
	if cfg.MetricsAddr != "" {
		mln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", api.MetricsHandler())
		servers = append(servers, &http.Server{Handler: withRequestID(mux), ReadHeaderTimeout: 10 * time.Second})
		listeners = append(listeners, mln)
	}
	errc := make(chan error, len(servers))
	for i, s := range servers {
		go func(s *http.Server, l net.Listener) {
			if err := s.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}(s, listeners[i])
	}
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "slotwheel is listening on %s\n", base)
	fmt.Fprintf(out, "  API:        %s/api/v1/venues\n", base)
	fmt.Fprintf(out, "  OpenAPI:    %s/openapi.json\n", base)
	fmt.Fprintf(out, "  Dashboard:  %s/monitoring/  (user %q", base, cfg.DashboardUser)
	if cfg.DashboardPasswordGenerated() {
		fmt.Fprintf(out, ", password %q", cfg.DashboardPassword)
	}
	fmt.Fprintln(out, ", or an admin token)")
	if cfg.DevLogin {
		fmt.Fprintf(out, "  Dev token:  curl -s -X POST %s/api/v1/auth/dev-login -d '{\"user_id\":\"alice\",\"role\":\"user\"}'\n", base)
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	log.Info("shutting down: draining HTTP")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shutdownCtx)
	}
	return nil
}

// withRequestID gives the metrics listener's answers an X-Request-Id too, as API.md promises for
// every answer.
func withRequestID(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		w.Header().Set("X-Request-Id", hex.EncodeToString(b))
		h.ServeHTTP(w, r)
	})
}
