package rushbench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/slotwheel/slotwheel/internal/bench/releasebench"
	"github.com/slotwheel/slotwheel/models"
)

// Env is where a run measures. Every measurement gets a database of its own on the MySQL server
// (dropped at its end), and slotwheel a key prefix of its own (its keys deleted at the end), so a
// run never touches data it did not make. Asynq's queues are the exception: the binary names them
// without the prefix, so slotwheel's instance shares the queues of whatever else uses the same
// Redis database — give the bench a database of its own (redis://…/5).
type Env struct {
	// MySQLDSN names a MySQL-compatible server and an account that may create and drop databases.
	MySQLDSN string
	// Pool sizes each design's connection pool: slotwheel's SLOTWHEEL_MYSQL_MAX_OPEN_CONNS and
	// _IDLE_CONNS, and the SQL design's, alike.
	Pool models.Pool
	// Redis is the server slotwheel runs on, read for INFO cpu and the oversell check; RedisEnv
	// are the SLOTWHEEL_REDIS_* settings (URL, cluster, Sentinel) by which its instance reaches the
	// same server, without the prefix.
	Redis    redis.UniversalClient
	RedisEnv []string
	// Prefix starts slotwheel's keys; each measurement adds a random part. Default "sw".
	Prefix string
	// Binary is the slotwheel binary both designs run as: `all`, and `bench rush-sql-server`.
	Binary string
	// LogDir receives each child's log, one file per design and run.
	LogDir string
}

func (e *Env) validate() error {
	var errs []error
	if e.MySQLDSN == "" {
		errs = append(errs, errors.New("bench rush needs a MySQL-compatible server (SLOTWHEEL_MYSQL_DSN)"))
	}
	if e.Redis == nil || len(e.RedisEnv) == 0 {
		errs = append(errs, errors.New("bench rush needs a Redis server (SLOTWHEEL_REDIS_URL or Sentinel)"))
	}
	if e.Binary == "" || e.LogDir == "" {
		errs = append(errs, errors.New("rushbench: Env.Binary and Env.LogDir are required"))
	}
	return errors.Join(errs...)
}

func (e *Env) prefix() string {
	if e.Prefix == "" {
		return "sw"
	}
	return e.Prefix
}

// describe names the backends for the report, without credentials, as releasebench does.
func (e *Env) describe(ctx context.Context) string {
	return (&releasebench.Env{MySQLDSN: e.MySQLDSN, Redis: e.Redis}).Describe(ctx)
}

// randomName is prefix and n random hex digits, for databases, key prefixes and secrets.
func randomName(prefix string, n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)[:n]
}

// database is one measurement's own database, and an account on the server.
type database struct {
	name  string
	dsn   string  // of the database itself, parseTime in UTC
	admin *sql.DB // on the server, for CREATE and DROP and for reading MariaDB's pid file
}

func (e *Env) newDatabase(ctx context.Context) (*database, error) {
	cfg, err := mysqldriver.ParseDSN(e.MySQLDSN)
	if err != nil {
		return nil, fmt.Errorf("SLOTWHEEL_MYSQL_DSN: %w", err)
	}
	admin, err := models.MySQLPool(e.MySQLDSN, models.Pool{MaxOpen: 2, MaxIdle: 2})
	if err != nil {
		return nil, err
	}
	d := &database{name: randomName("swrush_", 10), admin: admin}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+d.name); err != nil {
		_ = admin.Close()
		return nil, fmt.Errorf("create database %s (the account of SLOTWHEEL_MYSQL_DSN must be allowed to): %w", d.name, err)
	}
	cfg.DBName, cfg.ParseTime, cfg.Loc = d.name, true, time.UTC
	d.dsn = cfg.FormatDSN()
	return d, nil
}

func (d *database) drop(ctx context.Context) error {
	_, err := d.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+d.name)
	return errors.Join(err, d.admin.Close())
}

// childEnv is this process's environment without any SLOTWHEEL_ setting, then settings: a child
// gets exactly the settings the bench means it to have.
func childEnv(settings ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLOTWHEEL_") {
			env = append(env, kv)
		}
	}
	return append(env, settings...)
}

// masters are the Redis servers slotwheel's keys live on: every master of a cluster, or the one
// server.
func (e *Env) masters(ctx context.Context) ([]redis.Cmdable, error) {
	cc, ok := e.Redis.(*redis.ClusterClient)
	if !ok {
		return []redis.Cmdable{e.Redis}, nil
	}
	var mu sync.Mutex
	var out []redis.Cmdable
	err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, c)
		return nil
	})
	return out, err
}

// deleteKeys deletes every key matching pattern, one DEL each, as a pattern spans hash tags.
func (e *Env) deleteKeys(ctx context.Context, pattern string) error {
	masters, err := e.masters(ctx)
	errs := []error{err}
	for _, c := range masters {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			errs = append(errs, c.Del(ctx, iter.Val()).Err())
		}
		errs = append(errs, iter.Err())
	}
	return errors.Join(errs...)
}
