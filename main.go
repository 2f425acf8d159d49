// Command slotwheel runs the booking engine: the REST API, the release worker and the background
// loops, together (`all`, the default) or apart (`serve`, `worker`), plus `migrate`, `reconcile` and
// `bench`. With no MySQL or Redis configured it runs embedded (SQLite file, in-process Redis) for
// trying out.
package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
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
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/api"
	"github.com/slotwheel/slotwheel/config"
	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/idem"
	"github.com/slotwheel/slotwheel/engine/loop"
	"github.com/slotwheel/slotwheel/engine/notify/wechatmsg"
	"github.com/slotwheel/slotwheel/engine/replica"
	"github.com/slotwheel/slotwheel/engine/wechatpay"
	"github.com/slotwheel/slotwheel/internal/backend"
	"github.com/slotwheel/slotwheel/jobs"
	"github.com/slotwheel/slotwheel/models"
)

const usage = `slotwheel — sells time slots without overselling, expires unpaid holds on the second and
releases no-shows at start + grace.

Usage: slotwheel [command] [--config file.yaml]

Commands:
  all        API, worker and background loops in one process (the default)
  serve      the REST API only
  worker     the release worker, loader, reconciliation and background loops only
  migrate    create or upgrade the SQL schema, then exit
  reconcile  repair Redis and the queue from SQL once, print what was repaired, then exit
  bench      holds per second through the engine against the bare Lua script, on the configured
             Redis (or the embedded one); catalog in a throw-away SQLite file, keys under a bench prefix
  token --sub ops [--role admin] [--venue N] [--ttl 12h]
             print a Bearer token signed with SLOTWHEEL_JWT_SECRET, for the operator console at
             /admin/ and the admin routes (roles: admin; manager or staff with --venue; user)
  webhook-echo --secret whsec_…
             a webhook receiver for trying slotwheel out: verifies each request's signature and
             prints the event
  bench release
             a same-second burst and a steady stream of no-show releases, through slotwheel and the
             designs it is compared with (stock Asynq, a polling UPDATE), on the configured MySQL and
             Redis; --cases busy adds releases falling due while 750 confirms/s run; prints one table
             and writes it as JSON and a PNG chart
  bench rush
             the booking-opening rush: 20,000 clients at one instant for 400 units, through slotwheel
             (the binary's own instance) and the plain SQL design of SELECT … FOR UPDATE, on the
             configured MySQL and Redis; prints sold-out time, answers/s, latency, oversold and CPU
             per answer of each process, and writes them as JSON and a PNG chart

Settings come from SLOTWHEEL_* environment variables (see README.md) or a YAML file; the
environment wins. Without SLOTWHEEL_MYSQL_DSN and SLOTWHEEL_REDIS_URL (or Sentinel) it runs embedded.
`

// shutdownGrace bounds how long a SIGTERM waits for running work: the process must be gone within
// 5 seconds of it.
const shutdownGrace = 4 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv("GOGC") == "" {
		// The live heap is a few tens of MB (caches, pools); at Go's default of 100 the collector ran
		// every few thousand requests in the booking-opening rush, a twentieth of a hold's CPU. An
		// operator's GOGC or GOMEMLIMIT still rules.
		debug.SetGCPercent(400)
	}
	logs := newBufferedLog(os.Stderr)
	log := slog.New(logs.handler(slog.LevelInfo))
	err := run(ctx, os.Args[1:], os.Stdout, log)
	logs.Close()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "slotwheel:", err)
		os.Exit(1)
	}
}

// command is one subcommand: its flags, and what it runs once the configuration is loaded.
type command struct {
	flags func(fs *flag.FlagSet) func() error // registers flags; the returned func checks them
	run   func(ctx context.Context, cfg *config.Config, out io.Writer, log *slog.Logger) error
	// standalone commands touch no backend and read no settings (cfg is nil).
	standalone bool
}

func commands(bf *benchFlags, brf *benchReleaseFlags, bru *benchRushFlags, wef *webhookEchoFlags, tf *tokenFlags) map[string]command {
	return map[string]command{
		"all": {run: func(ctx context.Context, c *config.Config, out io.Writer, l *slog.Logger) error {
			return runInstance(ctx, c, out, l, true, true)
		}},
		"serve": {run: func(ctx context.Context, c *config.Config, out io.Writer, l *slog.Logger) error {
			return runInstance(ctx, c, out, l, true, false)
		}},
		"worker": {run: func(ctx context.Context, c *config.Config, out io.Writer, l *slog.Logger) error {
			return runInstance(ctx, c, out, l, false, true)
		}},
		"migrate":   {run: runMigrate},
		"reconcile": {run: runReconcile},
		"bench":     {flags: bf.register, run: bf.run},
		// `slotwheel bench release`: the release designs side by side (bench_release.go).
		"bench release": {flags: brf.register, run: brf.run},
		// `slotwheel bench rush`, and the plain SQL design it runs as a child (bench_rush.go).
		"bench rush":            {flags: bru.register, run: bru.run},
		"bench rush-sql-server": {run: runRushSQLServer},
		"webhook-echo":          {flags: wef.register, run: wef.run, standalone: true},
		"token":                 {flags: tf.register, run: tf.run},
	}
}

func run(ctx context.Context, args []string, out io.Writer, log *slog.Logger) error {
	name := "all"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if name == "help" {
		fmt.Fprint(out, usage)
		return nil
	}
	cmds := commands(&benchFlags{}, &benchReleaseFlags{}, &benchRushFlags{}, &webhookEchoFlags{}, &tokenFlags{})
	if name == "bench" && len(args) > 0 {
		if _, ok := cmds["bench "+args[0]]; ok {
			name, args = "bench "+args[0], args[1:]
		}
	}
	cmd, ok := cmds[name]
	if !ok {
		return fmt.Errorf("unknown command %q (try --help)", name)
	}
	fs := flag.NewFlagSet("slotwheel "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	cfgPath := fs.String("config", "", "YAML file with settings (the environment wins)")
	check := func() error { return nil }
	if cmd.flags != nil {
		check = cmd.flags(fs)
	}
	fs.Usage = func() {
		fmt.Fprint(out, usage)
		fmt.Fprintf(out, "\nFlags of %s:\n", name)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (try --help)", fs.Arg(0))
	}
	if err := check(); err != nil {
		return err
	}
	if cmd.standalone {
		return cmd.run(ctx, nil, out, log)
	}
	env := os.LookupEnv
	if strings.HasPrefix(name, "bench") {
		env = benchEnv
	}
	cfg, err := config.Load(*cfgPath, env)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(name, "bench") {
		if err := cfg.FillEmbeddedSecrets(); err != nil {
			return err
		}
		log.Info("configuration", "settings", cfg.Masked())
		if cfg.EmbeddedSQL() || cfg.EmbeddedRedis() {
			log.Warn("EMBEDDED MODE: in-process Redis and/or SQLite — for trying slotwheel, not for production",
				"embedded_redis", cfg.EmbeddedRedis(), "embedded_sql", cfg.EmbeddedSQL())
		}
	}
	return cmd.run(ctx, cfg, out, log)
}

// openSQL opens the database the configuration names; migrate overrides SLOTWHEEL_AUTO_MIGRATE.
func openSQL(ctx context.Context, cfg *config.Config, migrate bool, log *slog.Logger) (*sqlHandle, error) {
	o := backend.SQL{DSN: cfg.MySQLDSN, SQLitePath: cfg.SQLitePath,
		Pool: models.Pool{MaxOpen: cfg.MySQLMaxOpenConns, MaxIdle: cfg.MySQLMaxIdleConns}, Migrate: migrate,
		StartTimeout: cfg.StartTimeout, Log: log}
	db, err := backend.OpenSQL(ctx, o)
	if err != nil {
		return nil, err
	}
	h := &sqlHandle{db: db}
	if h.release, err = backend.ReleasePool(o); err != nil {
		h.Close()
		return nil, err
	}
	if h.replicas, err = backend.OpenReplicas(ctx, db, backend.Replicas{DSNs: cfg.ReplicaDSNs(),
		MaxLag: cfg.MySQLReplicaMaxLag, Pool: o.Pool, Log: log}); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// sqlHandle is an open database, closed with the instance: the main pool, on MySQL the release
// path's own, and the read replicas when configured.
type sqlHandle struct {
	db, release *gorm.DB
	replicas    *replica.Set
}

func (s *sqlHandle) Close() {
	if s.replicas != nil {
		s.replicas.Close()
	}
	for _, db := range []*gorm.DB{s.db, s.release} {
		if db == nil {
			continue
		}
		if d, err := db.DB(); err == nil {
			_ = d.Close()
		}
	}
}

func runMigrate(ctx context.Context, cfg *config.Config, out io.Writer, log *slog.Logger) error {
	sql, err := openSQL(ctx, cfg, true, log)
	if err != nil {
		return err
	}
	defer sql.Close()
	fmt.Fprintln(out, "schema is up to date")
	// The capacity ledger is counted from the bookings already there (a schema without it, or one a
	// tool changed behind slotwheel's back); a slot whose bookings already exceed it is named.
	rep, err := engine.CheckLedger(ctx, sql.db)
	if err != nil {
		return fmt.Errorf("capacity ledger: %w", err)
	}
	fmt.Fprintf(out, "capacity ledger: %d slots with bookings, %d counted again from their bookings\n", rep.Slots, len(rep.Repaired))
	for _, sl := range rep.Over {
		fmt.Fprintf(out, "OVER CAPACITY: slot %s has capacity %d but its bookings take %d units (bookings %v)\n",
			sl.Field, sl.Capacity, sl.Booked, sl.Bookings)
	}
	for _, sl := range rep.Missing {
		fmt.Fprintf(out, "no inventory row: slot %s is taken by bookings %v\n", sl.Field, sl.Bookings)
	}
	return nil
}

// wiring is an instance's open backends, engine and queue.
type wiring struct {
	cfg   *config.Config
	sql   *sqlHandle
	redis *backend.Redis
	eng   *engine.Engine
	jobs  *jobs.Jobs
}

func (w *wiring) Close() {
	w.jobs.Stop()
	w.redis.Close()
	w.sql.Close()
}

// wire opens the backends (each bounded by a start timeout, naming the setting when it gives up)
// and builds the engine and the queue on them.
func wire(ctx context.Context, cfg *config.Config, log *slog.Logger) (*wiring, error) {
	sql, err := openSQL(ctx, cfg, cfg.AutoMigrate, log)
	if err != nil {
		return nil, err
	}
	rdb, err := backend.OpenRedis(ctx, redisOptions(cfg))
	if err != nil {
		sql.Close()
		return nil, err
	}
	var notify engine.NotifyOptions
	if cfg.WechatAppID != "" {
		notify.Wechat = &wechatmsg.Client{AppID: cfg.WechatAppID, Secret: cfg.WechatSecret, APIBase: cfg.WechatAPIBase}
	}
	pay, err := wechatPayClient(cfg)
	if err != nil {
		rdb.Close()
		sql.Close()
		return nil, err
	}
	eng, err := engine.New(engine.Options{
		DB: sql.db, ReleaseDB: sql.release, Replicas: sql.replicas, Redis: rdb.Client, Prefix: cfg.RedisPrefix, Logger: log,
		HoldTTL: cfg.HoldTTL, DefaultGrace: cfg.DefaultGrace, ReleaseHorizon: cfg.ReleaseHorizon,
		RestoreWindow: cfg.RestoreWindow, CheckinOpens: cfg.CheckinOpens, ReminderLead: cfg.ReminderLead,
		ReleaseMode: booking.ReleaseMode(cfg.ReleaseMode), Notify: notify, WechatPay: pay,
		MaxActiveHolds: cfg.MaxActiveHolds, RateLimitPerIP: cfg.RateLimitPerIP,
		ErasureKey: erasureKey(cfg.JWTSecret),
	})
	if err == nil {
		var jb *jobs.Jobs
		jb, err = jobs.New(jobs.Options{Redis: rdb.Asynq, Engine: eng, Shards: cfg.ReleaseQueues,
			Lease: eng.Lease, Logger: log})
		if err == nil {
			eng.SetScheduler(jb)
			return &wiring{cfg: cfg, sql: sql, redis: rdb, eng: eng, jobs: jb}, nil
		}
	}
	rdb.Close()
	sql.Close()
	return nil, err
}

// redisOptions are the Redis settings of cfg, as backend.OpenRedis takes them.
func redisOptions(cfg *config.Config) backend.RedisOptions {
	return backend.RedisOptions{URL: cfg.RedisURL, Cluster: cfg.RedisCluster, SentinelMaster: cfg.RedisSentinelMaster,
		SentinelAddrs: cfg.SentinelAddrs(), StartTimeout: cfg.StartTimeout}
}

// wechatPayClient builds the WeChat Pay client the configuration names (nil when it names none),
// reading its keys now so that a bad key stops the start with the setting named.
func wechatPayClient(cfg *config.Config) (*wechatpay.Client, error) {
	if !cfg.WechatPay() {
		return nil, nil
	}
	key, err := wechatpay.LoadPrivateKey(cfg.WechatPayPrivateKey)
	if err != nil {
		return nil, fmt.Errorf("SLOTWHEEL_WECHATPAY_PRIVATE_KEY: %w", err)
	}
	pub, serial, err := wechatpay.LoadPublicKey(cfg.WechatPayPublicKey)
	if err != nil {
		return nil, fmt.Errorf("SLOTWHEEL_WECHATPAY_PUBLIC_KEY: %w", err)
	}
	if cfg.WechatPayPublicKeyID != "" {
		serial = cfg.WechatPayPublicKeyID
	}
	if serial == "" {
		return nil, errors.New("SLOTWHEEL_WECHATPAY_PUBLIC_KEY_ID is required: the WeChat Pay public key does not carry its id (PUB_KEY_ID_…)")
	}
	c, err := wechatpay.New(wechatpay.Config{MchID: cfg.WechatPayMchID, MerchantSerial: cfg.WechatPaySerial, PrivateKey: key,
		APIv3Key: []byte(cfg.WechatPayAPIv3Key), PlatformKeys: map[string]*rsa.PublicKey{serial: pub}, AppID: cfg.WechatAppID,
		NotifyURL: cfg.WechatPayNotifyURL, APIBase: cfg.WechatPayAPIBase})
	if err != nil {
		return nil, fmt.Errorf("SLOTWHEEL_WECHATPAY_*: %w", err)
	}
	return c, nil
}

// startupTimeout bounds the reconciliation a start waits for.
const startupTimeout = 2 * time.Minute

// processStart is when this process started: a start-up reconciliation that another instance began
// after it covers this one too.
var processStart = time.Now()

// reconcileAtStart rebuilds Redis's counters from SQL before the instance serves (an embedded Redis
// is empty at every start, and the same code recovers a production Redis that lost its data); the
// rest of reconciliation (overdue releases, release tasks) runs in the background once it serves.
// Of instances starting together one does it, and the others wait for it (engine.ReconcileAtStart).
func reconcileAtStart(ctx context.Context, w *wiring, log *slog.Logger) (done <-chan struct{}, err error) {
	rctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	out, err := w.eng.ReconcileAtStart(rctx, processStart)
	if err != nil {
		return nil, fmt.Errorf("start-up reconciliation: %w", err)
	}
	finished := make(chan struct{})
	if !out.Ran {
		log.Info("start-up reconciliation already done by another instance since this one started; serving")
		close(finished)
		return finished, nil
	}
	log.Info("counters reconciled; serving", "report", fmt.Sprintf("%+v", out.Report))
	go func() {
		defer close(finished)
		rctx, cancel := context.WithTimeout(ctx, startupTimeout)
		defer cancel()
		rep, err := w.eng.ReconcileRest(rctx, engine.ReconcileReport{})
		if err != nil && ctx.Err() == nil {
			log.Error("start-up reconciliation (overdue releases, release tasks) failed; the sweeps retry", "err", err)
			return
		}
		log.Info("reconciled", "report", fmt.Sprintf("%+v", rep))
	}()
	return finished, nil
}

func runReconcile(ctx context.Context, cfg *config.Config, out io.Writer, log *slog.Logger) error {
	w, err := wire(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer w.Close()
	rctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	rep, err := w.eng.Reconcile(rctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%+v\n", rep)
	return nil
}

// erasureKey derives the key of erased users' pseudonyms from the token secret, a secret every
// instance shares already: one more setting to keep equal everywhere would buy nothing. Rotating
// the token secret changes the pseudonyms of later erasures only.
func erasureKey(jwtSecret string) []byte {
	mac := hmac.New(sha256.New, []byte(jwtSecret))
	mac.Write([]byte("slotwheel erasure key"))
	return mac.Sum(nil)
}

// runInstance runs the API (serve), the worker and the background loops (work), or both, until ctx
// ends; then it drains within shutdownGrace.
func runInstance(ctx context.Context, cfg *config.Config, out io.Writer, log *slog.Logger, serve, work bool) error {
	w, err := wire(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer w.Close()
	stopOps, err := startOps(w, log)
	if err != nil {
		return err
	}
	defer stopOps()
	rest, err := reconcileAtStart(ctx, w, log)
	if err != nil {
		return err
	}
	// The background part of reconciliation finishes (or gives up at ctx's end) before the
	// backends close.
	defer func() { <-rest }()
	if cfg.Demo {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		v, created, err := w.eng.EnsureDemo(dctx)
		cancel()
		if err != nil {
			return fmt.Errorf("demo venue: %w", err)
		}
		log.Info("demo venue", "venue_id", v.ID, "created", created)
	}
	// Background loops stop when ctx ends; the deferred Stops wait for them.
	bg := []interface{ Stop() }{}
	defer func() {
		for _, s := range bg {
			s.Stop()
		}
	}()
	idemSQL := idem.NewSQL(w.sql.db, w.eng.Clock())
	purge := loop.New(loop.Config{Name: "idempotency_purge", Interval: time.Hour, Logger: log}, idemSQL.Purge)
	purge.Start(ctx)
	bg = append(bg, purge)
	if work {
		if err := w.jobs.Start(ctx); err != nil {
			return err
		}
		// Instances share the background work: each loop runs on the one instance holding its lease.
		loops := w.eng.NewLoops(engine.LoopsConfig{Lease: w.eng.Lease})
		loops.Start(ctx)
		bg = append(bg, loops)
	}
	if !serve {
		// A worker has no API listener: its metrics (the releases and deliveries it carries out) are
		// scraped on SLOTWHEEL_METRICS_ADDR.
		if w.cfg.MetricsAddr != "" {
			mln, err := net.Listen("tcp", w.cfg.MetricsAddr)
			if err != nil {
				return fmt.Errorf("SLOTWHEEL_METRICS_ADDR: listen on %s: %w", w.cfg.MetricsAddr, err)
			}
			ms := metricsServer()
			go func() { _ = ms.Serve(mln) }()
			defer func() {
				sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
				defer cancel()
				_ = ms.Shutdown(sctx)
			}()
		}
		log.Info("worker running")
		<-ctx.Done()
		log.Info("shutting down")
		return nil
	}
	return serveHTTP(ctx, w, idemSQL, out, log)
}

// serveHTTP runs the API (and a separate metrics listener when configured) until ctx ends, then
// drains.
func serveHTTP(ctx context.Context, w *wiring, idemSQL *idem.SQL, out io.Writer, log *slog.Logger) error {
	cfg := w.cfg
	origins, err := cfg.CORSOriginList()
	if err != nil {
		return fmt.Errorf("SLOTWHEEL_CORS_ORIGINS: %w", err)
	}
	handler, err := api.New(api.Options{
		Engine: w.eng, JWTSecret: []byte(cfg.JWTSecret), PaymentSecret: []byte(cfg.PaymentSecret),
		DevLogin: cfg.DevLogin, DevPayments: cfg.DevPayments,
		WechatAppID: cfg.WechatAppID, WechatSecret: cfg.WechatSecret, WechatAPIBase: cfg.WechatAPIBase,
		DashboardUser: cfg.DashboardUser, DashboardPassword: cfg.DashboardPassword,
		Asynq: w.redis.Asynq, MetricsOnAPI: cfg.MetricsAddr == "", CORSOrigins: origins, Logger: log,
		RequestTimeout: cfg.RequestTimeout,
		Idempotency:    idemSQL,
	})
	if err != nil {
		return err
	}
	if c, ok := handler.(io.Closer); ok {
		defer c.Close() // the dashboard's Redis connections
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("SLOTWHEEL_HTTP_ADDR: listen on %s: %w", cfg.HTTPAddr, err)
	}
	servers := []*http.Server{{Handler: handler, ReadHeaderTimeout: 10 * time.Second}}
	listeners := []net.Listener{ln}
	if cfg.MetricsAddr != "" {
		mln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			ln.Close()
			return fmt.Errorf("SLOTWHEEL_METRICS_ADDR: listen on %s: %w", cfg.MetricsAddr, err)
		}
		servers = append(servers, metricsServer())
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
	printAddresses(out, cfg, "http://"+ln.Addr().String())
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	log.Info("shutting down: draining HTTP")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shutdownCtx)
	}
	return nil
}

// metricsServer serves /metrics on a listener of its own (SLOTWHEEL_METRICS_ADDR).
func metricsServer() *http.Server {
	mux := http.NewServeMux()
	mux.Handle("/metrics", api.MetricsHandler())
	return &http.Server{Handler: withRequestID(mux), ReadHeaderTimeout: 10 * time.Second}
}

func printAddresses(out io.Writer, cfg *config.Config, base string) {
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
}

// withRequestID gives the metrics listener's answers an X-Request-Id too, as docs/API.md promises
// for every answer.
func withRequestID(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		w.Header().Set("X-Request-Id", hex.EncodeToString(b))
		h.ServeHTTP(w, r)
	})
}
