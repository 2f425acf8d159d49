// Package fleet runs slotwheel as an operator deploys it, for tests: the real binary (built once per
// test process), started as any number of instances of `slotwheel all` on one MySQL database and
// one Redis — a private server, a private Redis Cluster, or a master the instances find through
// Sentinel or reach through a virtual IP — each on a port of its own, with its logs kept and shown
// when the test fails. Instances are killed (-9), stopped (SIGTERM) and restarted on the same port;
// one may reach MySQL through a faultproxy or another server. A Client speaks the REST API as the
// mini-program, an admin, staff and the payment provider do, and remembers every booking the API
// confirmed; a Receiver is a webhook endpoint that checks and records what it is sent; Audit
// checks docs/DESIGN.md's invariants from MySQL and Redis together.
//
// Tests that use it call Main from their TestMain, so that the binary is removed afterwards. Methods
// that take a testing.TB fail the test and must be called from its goroutine; the others return
// errors and may be called from any goroutine (a chaos loop that kills instances at random). It is
// imported by tests only, and needs a real MySQL server (SLOTWHEEL_TEST_MYSQL_DSN or a private one)
// and redis-server.
package fleet

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/slotwheel/slotwheel/internal/backend"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/internal/testenv/redistest"
)

// Redis names the Redis the instances share.
type Redis struct {
	// URL is redis://host:port/db, or a cluster seed list (go-redis' cluster URL form); with
	// Sentinel it only gives the database (redis:///db), as SLOTWHEEL_REDIS_URL does.
	URL     string
	Cluster bool
	// SentinelMaster and SentinelAddrs, when set, reach the master through Sentinel
	// (SLOTWHEEL_REDIS_SENTINEL_MASTER and SLOTWHEEL_REDIS_SENTINEL_ADDRS).
	SentinelMaster string
	SentinelAddrs  []string
}

// PrivateRedis starts a redis-server of the test's own (stopped when the test ends): the instances'
// Asynq queues, which ignore the key prefix, then meet no other test's.
func PrivateRedis(t testing.TB) Redis {
	t.Helper()
	return Redis{URL: redistest.StartServer(t).URL()}
}

// ClusterRedis is a private Redis Cluster's seed list.
func ClusterRedis(c *redistest.Cluster) Redis { return Redis{URL: c.URL(), Cluster: true} }

// SentinelRedis is the master that private sentinels watch, database 0.
func SentinelRedis(s *redistest.Sentinel) Redis {
	return Redis{URL: "redis:///0", SentinelMaster: s.MasterName(), SentinelAddrs: s.Addrs()}
}

// Options configure a Fleet. Zero values take the documented defaults.
type Options struct {
	// Instances is how many instances Start starts; default 1.
	Instances int
	// MySQLDSN is the database every instance uses unless its InstanceOptions name another; default
	// a fresh database from testenv.NewDB (the test skips without SLOTWHEEL_TEST_MYSQL_DSN).
	MySQLDSN string
	// Redis is the Redis every instance uses; default PrivateRedis.
	Redis Redis
	// Env are settings for every instance ("SLOTWHEEL_HOLD_TTL=5s"), after the fleet's own.
	Env []string
	// NoMigrate leaves the schema to the instances (SLOTWHEEL_AUTO_MIGRATE in Env); otherwise New
	// runs `slotwheel migrate` once, as an operator would before starting instances.
	NoMigrate bool
	// ReadyTimeout bounds the wait for an instance's /readyz; default 90s.
	ReadyTimeout time.Duration
	// ReleaseSlack is how long after its release_at a booking may still be CONFIRMED before Audit
	// calls its release lost; default 5s.
	ReleaseSlack time.Duration
}

// Fleet is a test's set of instances on shared backends.
type Fleet struct {
	t      testing.TB
	opts   Options
	bin    string
	prefix string
	jwt    string
	pay    string
	db     *sql.DB
	rdb    redis.UniversalClient
	store  *redisstore.Store
	http   *httpClient

	mu        sync.Mutex
	instances []*Instance
	ledger    []Confirmed
}

// Confirmed is a booking the API confirmed with a 2xx answer: it must be in MySQL.
type Confirmed struct {
	BookingID string
	HoldID    string
	Via       string // the instance that answered
}

// Start builds the binary, prepares the backends (see New) and starts opts.Instances instances
// together, returning once every one is ready.
func Start(t testing.TB, opts Options) *Fleet {
	t.Helper()
	f := New(t, opts)
	n := max(opts.Instances, 1)
	for range n {
		f.Launch(InstanceOptions{})
	}
	f.WaitReady(t)
	return f
}

// New builds the binary and prepares the backends — a database and a Redis when the options name
// none, the schema unless NoMigrate — and starts no instance. Every instance is stopped when the
// test ends (SIGTERM, then SIGKILL), and their logs are printed if it failed.
func New(t testing.TB, opts Options) *Fleet {
	t.Helper()
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 90 * time.Second
	}
	if opts.ReleaseSlack <= 0 {
		opts.ReleaseSlack = 5 * time.Second
	}
	if opts.MySQLDSN == "" {
		db := testenv.NewDB(t)
		if !db.MySQL {
			t.Skipf("fleet: instances share a MySQL server; set %s", testenv.EnvMySQL)
		}
		opts.MySQLDSN = db.DSN
	}
	if opts.Redis.URL == "" && opts.Redis.SentinelMaster == "" {
		opts.Redis = PrivateRedis(t)
	}
	bin := Binary(t)
	f := &Fleet{t: t, opts: opts, bin: bin, prefix: testenv.Unique("swf"), jwt: secret("jwt"), pay: secret("pay")}
	f.http = newHTTPClient()
	t.Cleanup(f.cleanup)

	var err error
	if f.db, err = openAuditDB(opts.MySQLDSN); err != nil {
		t.Fatalf("fleet: %v", err)
	}
	if f.rdb, err = openRedis(opts.Redis); err != nil {
		t.Fatalf("fleet: %v", err)
	}
	f.store = redisstore.New(f.rdb, f.prefix)
	if !opts.NoMigrate {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := f.Run(ctx, "migrate"); err != nil {
			t.Fatalf("fleet: slotwheel migrate: %v\n%s", err, out)
		}
	}
	return f
}

// secret is a random secret long enough for a deployment outside embedded mode.
func secret(kind string) string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	return "fleet-" + kind + "-" + hex.EncodeToString(b)
}

// Prefix is the instances' SLOTWHEEL_REDIS_PREFIX.
func (f *Fleet) Prefix() string { return f.prefix }

// DSN is the instances' MySQL database (unless an instance names another).
func (f *Fleet) DSN() string { return f.opts.MySQLDSN }

// DB is a small pool on the fleet's database, for tests' own queries; it parses times as UTC.
func (f *Fleet) DB() *sql.DB { return f.db }

// Redis is a client of the instances' Redis (a cluster client on a cluster).
func (f *Fleet) Redis() redis.UniversalClient { return f.rdb }

// RedisOptions is the Redis the instances share.
func (f *Fleet) RedisOptions() Redis { return f.opts.Redis }

// Instances lists every instance launched, in order.
func (f *Fleet) Instances() []*Instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*Instance(nil), f.instances...)
}

// Instance is the i-th instance launched.
func (f *Fleet) Instance(i int) *Instance { return f.Instances()[i] }

// Client is a client of the i-th instance.
func (f *Fleet) Client(i int) *Client { return f.Instance(i).Client() }

// Confirmed lists every booking a 2xx answer confirmed so far.
func (f *Fleet) Confirmed() []Confirmed {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Confirmed(nil), f.ledger...)
}

func (f *Fleet) recordConfirmed(c Confirmed) {
	f.mu.Lock()
	f.ledger = append(f.ledger, c)
	f.mu.Unlock()
}

// env is what every process of the fleet is given: the environment of the test without any
// SLOTWHEEL_ setting (a developer's own must not leak in), the fleet's settings, then extra.
func (f *Fleet) env(dsn string, extra ...[]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLOTWHEEL_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"SLOTWHEEL_MYSQL_DSN="+dsn,
		"SLOTWHEEL_REDIS_URL="+f.opts.Redis.URL,
		fmt.Sprintf("SLOTWHEEL_REDIS_CLUSTER=%t", f.opts.Redis.Cluster),
		"SLOTWHEEL_REDIS_PREFIX="+f.prefix,
		"SLOTWHEEL_JWT_SECRET="+f.jwt,
		"SLOTWHEEL_PAYMENT_SECRET="+f.pay,
		"SLOTWHEEL_DEV_LOGIN=true",
		"SLOTWHEEL_DEV_PAYMENTS=true",
		"SLOTWHEEL_DEMO=false",
	)
	if r := f.opts.Redis; r.SentinelMaster != "" {
		env = append(env, "SLOTWHEEL_REDIS_SENTINEL_MASTER="+r.SentinelMaster,
			"SLOTWHEEL_REDIS_SENTINEL_ADDRS="+strings.Join(r.SentinelAddrs, ","))
	}
	env = append(env, f.opts.Env...)
	for _, e := range extra {
		env = append(env, e...)
	}
	return env
}

// Run runs a one-shot command of the binary (migrate, reconcile) with the fleet's settings and
// returns its output.
func (f *Fleet) Run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, f.bin, args...)
	cmd.Env = f.env(f.opts.MySQLDSN)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// WaitReady waits until every instance that runs is ready.
func (f *Fleet) WaitReady(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.ReadyTimeout)
	defer cancel()
	var wg sync.WaitGroup
	insts := f.Instances()
	errs := make([]error, len(insts))
	for i, in := range insts {
		if in.Running() {
			wg.Go(func() { errs[i] = in.WaitReady(ctx) })
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("fleet: %v", err)
	}
}

// cleanup stops every instance (SIGTERM together, SIGKILL for any still running 10 s later) and,
// when the test failed, prints the end of each one's log.
func (f *Fleet) cleanup() {
	var wg sync.WaitGroup
	for _, in := range f.Instances() {
		wg.Go(func() {
			if in.Running() {
				_ = in.stop(10 * time.Second)
			}
		})
	}
	wg.Wait()
	if f.t.Failed() {
		for _, in := range f.Instances() {
			f.t.Logf("fleet: last lines of %s's log (of %d):\n%s", in.Name, in.logs.lines(), in.logs.tail(300))
		}
	}
	if f.db != nil {
		_ = f.db.Close()
	}
	if f.rdb != nil {
		_ = f.rdb.Close()
	}
	f.http.close()
}

// NewDatabase creates an empty database on the MySQL server that serverDSN reaches (a private
// mariadbtest server, say: root, any database), dropped when the test ends if the server still
// answers, and returns its DSN.
func NewDatabase(t testing.TB, serverDSN string) string {
	t.Helper()
	cfg, err := mysqldriver.ParseDSN(serverDSN)
	if err != nil {
		t.Fatalf("fleet: %v", err)
	}
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("fleet: %v", err)
	}
	name := testenv.Unique("swf_")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		_ = admin.Close()
		t.Fatalf("fleet: create database on %s: %v", cfg.Addr, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name)
		_ = admin.Close()
	})
	cfg.DBName = name
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	return cfg.FormatDSN()
}

// Via returns dsn with its server address replaced by addr: the DSN an instance uses to reach the
// same database through a faultproxy.
func Via(dsn, addr string) string {
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		return dsn
	}
	cfg.Addr = addr
	return cfg.FormatDSN()
}

func openAuditDB(dsn string) (*sql.DB, error) {
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg.ParseTime, cfg.Loc = true, time.UTC
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	// Few connections: the instances' pools are what a test measures against max_connections.
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(2)
	return db, nil
}

// openRedis opens the test's own client of the instances' Redis. It follows a failover as the
// instances do: a cluster client that reloads the topology when a node stops answering (the
// engine's own constructor), and Sentinel's failover client.
func openRedis(r Redis) (redis.UniversalClient, error) {
	switch {
	case r.SentinelMaster != "":
		db := 0
		if r.URL != "" {
			opt, err := redis.ParseURL(r.URL)
			if err != nil {
				return nil, err
			}
			db = opt.DB
		}
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: r.SentinelMaster, SentinelAddrs: r.SentinelAddrs, DB: db,
			DialTimeout: time.Second}), nil
	case r.Cluster:
		opt, err := redis.ParseClusterURL(r.URL)
		if err != nil {
			return nil, err
		}
		return backend.NewClusterClient(opt), nil
	}
	opt, err := redis.ParseURL(r.URL)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(opt), nil
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// Binary builds the slotwheel binary (the module's root package) once per test process, without
// the race detector: the instances are what a deployment runs.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "slotwheel-fleet-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "slotwheel")
		build := exec.Command("go", "build", "-o", builtBin, ".")
		build.Dir = root
		out, err := build.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("fleet: %v", buildErr)
	}
	return builtBin
}

// Main runs the tests and removes the binary Binary built. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		_ = os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

// moduleRoot is the nearest directory above the working directory (a test runs in its package's)
// that holds go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// VenueKey is a key of the venue's hash tag (its slot counters): in a cluster, the venue's state
// lives on the master that serves this key's slot.
func (f *Fleet) VenueKey(venueID uint64) string {
	return redisstore.NewKeys(f.prefix).Venue(venueID).Used()
}

// LeaseHolder is the instance that runs the leased background loop named loop (the wheel, say): the
// one whose count of runs of it grows, read from /metrics twice, over after apart.
func (f *Fleet) LeaseHolder(ctx context.Context, loop string, after time.Duration) (*Instance, error) {
	labels := map[string]string{"loop": loop, "outcome": "ok"}
	insts := f.Instances()
	before := make([]float64, len(insts))
	for i, in := range insts {
		if in.Running() {
			before[i], _, _ = in.Metric(ctx, "slotwheel_loop_runs_total", labels)
		}
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(after):
	}
	var holders []*Instance
	for i, in := range insts {
		if !in.Running() {
			continue
		}
		v, _, err := in.Metric(ctx, "slotwheel_loop_runs_total", labels)
		if err != nil {
			return nil, err
		}
		if v > before[i] {
			holders = append(holders, in)
		}
	}
	if len(holders) != 1 {
		return nil, fmt.Errorf("%d instances ran %s in %s; want one", len(holders), loop, after)
	}
	return holders[0], nil
}
