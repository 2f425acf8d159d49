package releasebench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/models"
)

// Env is where a run measures. Every measurement gets a database of its own (created on the
// MySQL server, or a SQLite file, and dropped at its end), a key prefix of its own and queue names
// of its own, so a run never touches data it did not make, even on a Redis shared with a service.
type Env struct {
	// MySQLDSN names a MySQL-compatible server and an account that may create and drop databases;
	// empty means SQLite files in Dir.
	MySQLDSN string
	// Pool sizes slotwheel's connection pool, as the instance's settings would.
	Pool models.Pool
	// Dir holds the SQLite files; required without MySQLDSN.
	Dir string
	// Redis is the server measured on, and AsynqOpt how Asynq dials it. A Redis Cluster client
	// works: keys are found and deleted on every master.
	Redis    redis.UniversalClient
	AsynqOpt asynq.RedisConnOpt
	// Embedded marks the in-process Redis, which has no INFO memory: bytes per booking are not
	// measured there.
	Embedded bool
	// Prefix starts every key a run writes; each measurement adds a random part. Default "sw".
	Prefix string
	// Logger receives the warnings of the engines and servers under test; default slog.Default().
	Logger *slog.Logger
	// OnRelease, when set, is called as each measurement's bookings start falling due, with the
	// measurement's name ("slotwheel busy", "asynq steady, run 2"); the function it returns is
	// called when they are all seen released or the wait ends. For a CPU profile of that window.
	OnRelease func(name string) (end func())
	// NewReleaseQueue builds the release queue that `slotwheel all` runs beside its engine (jobs'
	// Asynq worker, on AsynqOpt) for eng, the engine of the slotwheel design under test, with queue
	// as its queue name, concurrency release workers (0: its default) and log as its logger. The
	// caller injects it, so that this package needs nothing of jobs; the measurement makes it eng's
	// scheduler, starts it once the fixture is made and stops it at its end. Required to measure
	// the slotwheel design.
	NewReleaseQueue func(eng *engine.Engine, queue string, concurrency int, log *slog.Logger) (ReleaseQueue, error)
	// LoaderInterval is how often that queue's loader queues the release tasks falling due within
	// its horizon (jobs.DefaultLoaderInterval): the first release_at leaves it time to. Required
	// with NewReleaseQueue.
	LoaderInterval time.Duration
}

// ReleaseQueue is the release queue of the slotwheel design (a *jobs.Jobs): the engine's release
// scheduler and, once started, the worker and the loader that release what falls due.
type ReleaseQueue interface {
	release.Scheduler
	// Start starts the worker and the loops; they run until Stop or until ctx ends.
	Start(ctx context.Context) error
	Stop()
	// Queues names every queue it uses, for the measurement to delete at its end.
	Queues() []string
}

func (e *Env) logger() *slog.Logger {
	if e.Logger == nil {
		return slog.Default()
	}
	return e.Logger
}

func (e *Env) prefix() string {
	if e.Prefix == "" {
		return "sw"
	}
	return e.Prefix
}

// Describe names the backends for the report, without credentials.
func (e *Env) Describe(ctx context.Context) string {
	sqlName := "sqlite"
	if e.MySQLDSN != "" {
		sqlName = "mysql"
		if cfg, err := mysqldriver.ParseDSN(e.MySQLDSN); err == nil {
			sqlName += " at " + cfg.Addr
		}
		if db, err := sql.Open("mysql", e.MySQLDSN); err == nil {
			var v string
			if db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v) == nil {
				sqlName += " (" + v + ")"
			}
			_ = db.Close()
		}
	}
	redisName := "embedded redis (miniredis)"
	if !e.Embedded {
		redisName = "redis"
		if v := e.infoField(ctx, "server", "redis_version"); v != "" {
			redisName += " " + v
		}
		if _, ok := e.Redis.(*redis.ClusterClient); ok {
			redisName += " cluster"
		}
	}
	return sqlName + " + " + redisName
}

// randomName is a short random name for databases, prefixes and queues.
func randomName(prefix string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// database is one measurement's own database.
type database struct {
	gorm  *gorm.DB // slotwheel's schema; nil for an anchor's
	sql   *sql.DB
	mysql bool
	// open opens another pool on the same database: for the instance that makes the bookings, and
	// for the observer, which must not wait for a connection of the pool it observes.
	open func(maxOpen int) (*gorm.DB, error)
	drop func(ctx context.Context) error
}

// newDatabase creates a database for one measurement: with slotwheel's schema migrated, or empty
// for an anchor (whose plain table the anchor creates). Anchors' MySQL sessions run in UTC, so
// that NOW(3) compares with the UTC times written into them.
func (e *Env) newDatabase(ctx context.Context, slotwheel bool) (*database, error) {
	name := randomName("swbench_")
	if e.MySQLDSN == "" {
		return e.newSQLite(ctx, name, slotwheel)
	}
	cfg, err := mysqldriver.ParseDSN(e.MySQLDSN)
	if err != nil {
		return nil, fmt.Errorf("SLOTWHEEL_MYSQL_DSN: %w", err)
	}
	admin, err := models.MySQLPool(e.MySQLDSN, models.Pool{MaxOpen: 2, MaxIdle: 2})
	if err != nil {
		return nil, err
	}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		_ = admin.Close()
		return nil, fmt.Errorf("create database %s (the account of SLOTWHEEL_MYSQL_DSN must be allowed to): %w", name, err)
	}
	var pools []*sql.DB
	d := &database{mysql: true}
	d.drop = func(ctx context.Context) error {
		for _, p := range pools {
			_ = p.Close()
		}
		_, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name)
		return errors.Join(err, admin.Close())
	}
	cfg.DBName = name
	cfg.ParseTime, cfg.Loc = true, time.UTC
	if !slotwheel {
		params := map[string]string{"time_zone": "'+00:00'"}
		for k, v := range cfg.Params {
			params[k] = v
		}
		cfg.Params = params
	}
	dsn := cfg.FormatDSN()
	d.open = func(maxOpen int) (*gorm.DB, error) {
		p, err := models.MySQLPool(dsn, models.Pool{MaxOpen: maxOpen, MaxIdle: maxOpen})
		if err != nil {
			return nil, err
		}
		pools = append(pools, p)
		return models.MySQLGorm(p)
	}
	if slotwheel {
		d.gorm, err = models.OpenMySQL(dsn, e.Pool)
		if err == nil {
			d.sql, err = d.gorm.DB()
			pools = append(pools, d.sql)
		}
		if err == nil {
			err = models.Migrate(ctx, d.gorm)
		}
	} else {
		var g *gorm.DB
		if g, err = d.open(32); err == nil {
			d.sql, err = g.DB()
		}
	}
	if err != nil {
		return nil, errors.Join(err, d.drop(context.WithoutCancel(ctx)))
	}
	return d, nil
}

func (e *Env) newSQLite(ctx context.Context, name string, slotwheel bool) (*database, error) {
	if e.Dir == "" {
		return nil, errors.New("releasebench: Env.Dir is required without a MySQL DSN")
	}
	path := filepath.Join(e.Dir, name+".db")
	var pools []*sql.DB
	d := &database{}
	d.open = func(int) (*gorm.DB, error) {
		g, err := models.OpenSQLite(path)
		if err != nil {
			return nil, err
		}
		p, err := g.DB()
		if err != nil {
			return nil, err
		}
		pools = append(pools, p)
		return g, nil
	}
	d.drop = func(context.Context) error {
		for _, p := range pools {
			_ = p.Close()
		}
		for _, suffix := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(path + suffix)
		}
		return nil
	}
	g, err := d.open(0)
	if err == nil {
		d.sql, err = g.DB()
	}
	if err == nil && slotwheel {
		d.gorm = g
		err = models.Migrate(ctx, g)
	}
	if err != nil {
		return nil, errors.Join(err, d.drop(ctx))
	}
	return d, nil
}

// observer opens the pool a measurement's watcher reads through.
func (d *database) observer() (*sql.DB, error) {
	g, err := d.open(2)
	if err != nil {
		return nil, err
	}
	return g.DB()
}

// forEachNode runs fn on every master of a Redis Cluster, or on the one server.
func (e *Env) forEachNode(ctx context.Context, fn func(ctx context.Context, c redis.Cmdable) error) error {
	if cc, ok := e.Redis.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return fn(ctx, c) })
	}
	return fn(ctx, e.Redis)
}

// deleteKeys deletes the keys matching pattern on every node. Keys are deleted one per command, as
// a pattern spans many hash tags and a Cluster refuses a multi-key DEL across slots.
func (e *Env) deleteKeys(ctx context.Context, pattern string) error {
	return e.forEachNode(ctx, func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		pipe := c.Pipeline()
		flush := func() error {
			if pipe.Len() == 0 {
				return nil
			}
			_, err := pipe.Exec(ctx)
			return err
		}
		for iter.Next(ctx) {
			pipe.Del(ctx, iter.Val())
			if pipe.Len() >= 500 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return errors.Join(iter.Err(), flush())
	})
}

// deleteQueues deletes the Asynq keys of queues, which Asynq names without our prefix.
func (e *Env) deleteQueues(ctx context.Context, queues ...string) error {
	errs := []error{}
	for _, q := range queues {
		errs = append(errs, e.deleteKeys(ctx, "asynq:{"+q+"}:*"))
		errs = append(errs, e.Redis.SRem(ctx, "asynq:queues", q).Err())
	}
	return errors.Join(errs...)
}

// usedMemory is INFO memory's used_memory summed over the masters, or -1 on the embedded Redis.
func (e *Env) usedMemory(ctx context.Context) int64 {
	if e.Embedded {
		return -1
	}
	var mu sync.Mutex // a Cluster's masters answer at once
	var total int64
	err := e.forEachNode(ctx, func(ctx context.Context, c redis.Cmdable) error {
		n, err := strconv.ParseInt(infoField(ctx, c, "memory", "used_memory"), 10, 64)
		mu.Lock()
		total += n
		mu.Unlock()
		return err
	})
	if err != nil {
		return -1
	}
	return total
}

func (e *Env) infoField(ctx context.Context, section, field string) string {
	var mu sync.Mutex
	var v string
	_ = e.forEachNode(ctx, func(ctx context.Context, c redis.Cmdable) error {
		got := infoField(ctx, c, section, field)
		mu.Lock()
		v = got
		mu.Unlock()
		return nil
	})
	return v
}

func infoField(ctx context.Context, c redis.Cmdable, section, field string) string {
	info, err := c.Info(ctx, section).Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
