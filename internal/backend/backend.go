// Package backend opens slotwheel's stores: MySQL or the embedded SQLite file through models/, and a
// Redis server, a Redis Cluster, Redis through Sentinel or the embedded in-process miniredis, whose
// clock it drives (miniredis moves key TTLs only when told to). Its cluster clients reload the
// topology as soon as a node stops answering, so that a failover is followed within moments. Every
// call it makes at start has a timeout and a bounded retry, so an unreachable or silent backend ends
// the start with a message naming the setting. It is used by main and by tools; engine/ itself
// receives open handles.
package backend

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/models"
)

// DefaultStartTimeout is how long a start waits for a backend to answer before giving up.
const DefaultStartTimeout = 20 * time.Second

// SQL configures the SQL store.
type SQL struct {
	DSN        string // MySQL; empty means the embedded SQLite file
	SQLitePath string
	Pool       models.Pool
	// Migrate creates or upgrades the schema at open; otherwise the schema must exist already
	// (outside embedded mode only `slotwheel migrate` changes it).
	Migrate bool
	// StartTimeout bounds the wait for the server to answer; default DefaultStartTimeout.
	StartTimeout time.Duration
	// Log receives what the start decided (migrated or not); default slog.Default().
	Log *slog.Logger
}

// OpenSQL opens the SQL store and, when asked, migrates it. A server that does not answer within
// StartTimeout (refusing, or accepting and never answering) is an error naming
// SLOTWHEEL_MYSQL_DSN; so is ctx ending (a SIGTERM during the start).
func OpenSQL(ctx context.Context, o SQL) (*gorm.DB, error) {
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	var db *gorm.DB
	var err error
	setting := "SLOTWHEEL_SQLITE_PATH"
	if o.DSN != "" {
		setting = "SLOTWHEEL_MYSQL_DSN"
		// The server must answer before GORM, which asks its version without a timeout, is put on it.
		conn, err := models.MySQLPool(o.DSN, o.Pool)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", setting, err)
		}
		if err := retry(ctx, o.StartTimeout, conn.PingContext); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("%s: the database did not answer within %s: %w", setting, o.StartTimeout, err)
		}
		if err := checkPool(ctx, conn, o.Pool, o.Log); err != nil {
			_ = conn.Close()
			return nil, err
		}
		checkDurability(ctx, conn, o.Log)
		if db, err = models.MySQLGorm(conn); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("%s: %w", setting, err)
		}
	} else if db, err = models.OpenSQLite(o.SQLitePath); err != nil {
		return nil, fmt.Errorf("%s: %w", setting, err)
	}
	if o.Migrate {
		mctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		migrated, err := models.MigrateOnce(mctx, db)
		if err != nil {
			closeDB(db)
			return nil, fmt.Errorf("%s: %w", setting, err)
		}
		if migrated {
			o.Log.Info("schema migrated")
		} else {
			o.Log.Info("schema already up to date; not migrated")
		}
		return db, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if !db.WithContext(cctx).Migrator().HasTable(&models.Booking{}) {
		closeDB(db)
		return nil, fmt.Errorf("%s: the schema is missing: run `slotwheel migrate` (or set SLOTWHEEL_AUTO_MIGRATE=true)", setting)
	}
	return db, nil
}

// checkPool refuses a pool that one instance alone could grow past the server's max_connections: it
// would fail requests with error 1040 (too many connections) as soon as the load filled it, on this
// instance and on every other one using the server. A pool that fits alone but not beside the
// connections already open is only warned of, since those may be going away (a rolling restart).
// Servers that report no limit (TiDB's max_connections 0) or cannot say are not checked.
func checkPool(ctx context.Context, conn *sql.DB, p models.Pool, log *slog.Logger) error {
	maxOpen := p.WithDefaults().MaxOpen + models.ReleaseConns
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var limit int
	if err := conn.QueryRowContext(qctx, "SELECT @@max_connections").Scan(&limit); err != nil || limit <= 0 {
		return nil
	}
	if maxOpen >= limit {
		return fmt.Errorf("SLOTWHEEL_MYSQL_MAX_OPEN_CONNS: %d connections (and %d of the release path's own) cannot fit the server's max_connections of %d; "+
			"size it so that instances × (SLOTWHEEL_MYSQL_MAX_OPEN_CONNS + %d) stays below max_connections",
			maxOpen-models.ReleaseConns, models.ReleaseConns, limit, models.ReleaseConns)
	}
	var name string
	var open int
	if err := conn.QueryRowContext(qctx, "SHOW GLOBAL STATUS LIKE 'Threads_connected'").Scan(&name, &open); err == nil && open+maxOpen > limit {
		log.Warn("the MySQL pool may not fit beside the connections already open; lower SLOTWHEEL_MYSQL_MAX_OPEN_CONNS "+
			"or raise max_connections", "pool", maxOpen, "open_now", open, "max_connections", limit)
	}
	return nil
}

// ReleasePool opens the release path's own models.ReleaseConns connections to the database o names
// (engine.Options.ReleaseDB); nil on SQLite, which serialises writers whatever the pool. Open it
// after OpenSQL has checked the server and the schema.
func ReleasePool(o SQL) (*gorm.DB, error) {
	if o.DSN == "" {
		return nil, nil
	}
	conn, err := models.MySQLPool(o.DSN, models.Pool{MaxOpen: models.ReleaseConns, MaxIdle: models.ReleaseConns})
	if err != nil {
		return nil, fmt.Errorf("SLOTWHEEL_MYSQL_DSN: %w", err)
	}
	db, err := models.MySQLGorm(conn)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("SLOTWHEEL_MYSQL_DSN: %w", err)
	}
	return db, nil
}

func closeDB(db *gorm.DB) {
	if s, err := db.DB(); err == nil {
		_ = s.Close()
	}
}

// retry runs try until it succeeds, ctx ends or timeout passes, giving each attempt a few seconds of
// its own so that a silent server cannot hold one attempt forever.
func retry(ctx context.Context, timeout time.Duration, try func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	wait := 250 * time.Millisecond
	for {
		actx, acancel := context.WithTimeout(ctx, min(3*time.Second, timeout))
		err := try(actx)
		acancel()
		if err == nil {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return ctx.Err()
			}
			return err
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// Redis is an open Redis: a client, the options Asynq dials with, and (embedded) the server.
type Redis struct {
	Client  redis.UniversalClient
	Asynq   asynq.RedisConnOpt
	Cluster bool
	mini    *miniredis.Miniredis
	stop    chan struct{}
	once    sync.Once
}

// Embedded reports whether this is the in-process Redis.
func (r *Redis) Embedded() bool { return r.mini != nil }

// RedisOptions configure the Redis connection.
type RedisOptions struct {
	// URL is redis://[:password@]host:port/db, or with Cluster a seed list in go-redis's cluster form
	// redis://[:password@]host1:port1?addr=host2:port2&addr=host3:port3. With Sentinel it only
	// supplies the password (and user) and the database number, and may be empty. Empty without
	// Sentinel starts the embedded in-process Redis.
	URL     string
	Cluster bool
	// SentinelMaster and SentinelAddrs reach Redis through Sentinel: the name of the master the
	// sentinels monitor and their host:port addresses. Exclusive with Cluster.
	SentinelMaster string
	SentinelAddrs  []string
	// StartTimeout bounds the wait for the server to answer; default DefaultStartTimeout.
	StartTimeout time.Duration
}

func (o RedisOptions) sentinel() bool { return o.SentinelMaster != "" || len(o.SentinelAddrs) > 0 }

// Describe names the Redis these options reach, for logs, without a password.
func (o RedisOptions) Describe() string {
	if o.sentinel() {
		return fmt.Sprintf("sentinel master %q via %s", o.SentinelMaster, strings.Join(o.SentinelAddrs, ","))
	}
	return Describe(o.URL)
}

// OpenRedis connects to the configured Redis (or starts the in-process one on a loopback port) and
// waits, bounded, for it to answer. Through Sentinel it waits for a sentinel to name the master and
// for the master to answer, and a failure names the setting at fault.
func OpenRedis(ctx context.Context, o RedisOptions) (*Redis, error) {
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.URL == "" && !o.sentinel() {
		if o.Cluster {
			return nil, errors.New("SLOTWHEEL_REDIS_CLUSTER: needs SLOTWHEEL_REDIS_URL (the cluster's seed list)")
		}
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("start embedded redis: %w", err)
		}
		r := &Redis{
			Client: redis.NewClient(&redis.Options{Addr: mr.Addr(), PoolSize: 128, PoolTimeout: 30 * time.Second, Protocol: Protocol}),
			Asynq:  asynq.RedisClientOpt{Addr: mr.Addr()},
			mini:   mr,
			stop:   make(chan struct{}),
		}
		go r.driveClock()
		return r, nil
	}
	if o.sentinel() {
		return openSentinel(ctx, o)
	}
	r, err := dial(o)
	if err != nil {
		return nil, err
	}
	if err := retry(ctx, o.StartTimeout, func(ctx context.Context) error { return r.Client.Ping(ctx).Err() }); err != nil {
		r.Close()
		return nil, fmt.Errorf("SLOTWHEEL_REDIS_URL: redis did not answer within %s: %w", o.StartTimeout, err)
	}
	return r, nil
}

// poolSize is at least this: waiting for a pooled connection must outlast bursts, and a timeout
// there would fail a hold.
const poolSize = 128

// Protocol is the RESP version slotwheel's clients speak, unless a URL names one: RESP2. slotwheel
// subscribes to nothing, and under RESP3 go-redis looks for push notifications on every reply,
// which a CPU profile of the hold path put at a twentieth of a hold's cost in the process.
const Protocol = 2

func dial(o RedisOptions) (*Redis, error) {
	if !o.Cluster {
		opt, err := redis.ParseURL(o.URL)
		if err != nil {
			return nil, fmt.Errorf("SLOTWHEEL_REDIS_URL: %w", err)
		}
		opt.PoolSize = max(opt.PoolSize, poolSize)
		opt.PoolTimeout = 30 * time.Second
		if opt.Protocol == 0 {
			opt.Protocol = Protocol
		}
		aopt, err := asynq.ParseRedisURI(o.URL)
		if err != nil {
			return nil, fmt.Errorf("SLOTWHEEL_REDIS_URL: %w", err)
		}
		return &Redis{Client: redis.NewClient(opt), Asynq: aopt}, nil
	}
	opt, err := redis.ParseClusterURL(o.URL)
	if err != nil {
		return nil, fmt.Errorf("SLOTWHEEL_REDIS_URL (cluster): %w", err)
	}
	// Asynq has no cluster URL form (ParseRedisURI refuses one): it gets the same seeds, password
	// and bounds, and its own pool sizes, as with asynq.RedisClusterClientOpt.
	aopt := ClusterConnOpt{opt: redis.ClusterOptions{Addrs: slices.Clone(opt.Addrs), Username: opt.Username,
		Password: opt.Password, TLSConfig: opt.TLSConfig, DialTimeout: opt.DialTimeout, DialerRetries: opt.DialerRetries,
		ReadTimeout: opt.ReadTimeout, WriteTimeout: opt.WriteTimeout, MaxRedirects: opt.MaxRedirects}}
	opt.PoolSize = max(opt.PoolSize, poolSize)
	opt.PoolTimeout = 30 * time.Second
	return &Redis{Client: NewClusterClient(opt), Asynq: aopt, Cluster: true}, nil
}

// driveClock moves miniredis' TTL clock with the wall clock, so that expiring keys (hold records
// after 24 h, Asynq's leases) behave as on a real server.
func (r *Redis) driveClock() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-r.stop:
			return
		case now := <-t.C:
			r.mini.FastForward(now.Sub(last))
			last = now
		}
	}
}

// Close closes the client and stops the embedded server.
func (r *Redis) Close() {
	r.once.Do(func() {
		_ = r.Client.Close()
		if r.mini != nil {
			close(r.stop)
			r.mini.Close()
		}
	})
}

// Describe names a Redis URL for logs without its password.
func Describe(rawURL string) string {
	if rawURL == "" {
		return "embedded"
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "redis"
	}
	return u.Scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/")
}
