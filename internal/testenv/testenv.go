// Package testenv gives each test its own isolated backends: a fresh database on the MySQL server
// named by SLOTWHEEL_TEST_MYSQL_DSN (or a SQLite file), and a Redis connection on the server named by
// SLOTWHEEL_TEST_REDIS_URL (or an in-process miniredis) with its own key prefix and queue names. With
// SLOTWHEEL_TEST_REQUIRE_SERVERS=1 a missing or unreachable server fails the test instead of falling
// back. It is imported by tests only.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/internal/backend"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/models"
)

// Env variables read by this package.
const (
	EnvMySQL   = "SLOTWHEEL_TEST_MYSQL_DSN"
	EnvRedis   = "SLOTWHEEL_TEST_REDIS_URL"
	EnvRequire = "SLOTWHEEL_TEST_REQUIRE_SERVERS"
)

// Redis is a test's Redis: a client, a unique key prefix, and (embedded only) the miniredis server,
// whose clock tests must drive with FastForward.
type Redis struct {
	Client *redis.Client
	Prefix string
	URL    string // redis:// address, for components that dial themselves (Asynq)
	Mini   *miniredis.Miniredis
}

// Unique returns a short random name, for prefixes, queues and databases.
func Unique(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func required() bool { return os.Getenv(EnvRequire) == "1" }

// RealServers reports whether the tests run against real servers.
func RealServers() bool { return os.Getenv(EnvMySQL) != "" || os.Getenv(EnvRedis) != "" }

// NewRedis returns a Redis for one test, cleaned up when it ends.
func NewRedis(t testing.TB) *Redis {
	t.Helper()
	url := os.Getenv(EnvRedis)
	if url == "" {
		if required() {
			t.Fatalf("%s=1 but %s is not set", EnvRequire, EnvRedis)
		}
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr(), PoolSize: 256, PoolTimeout: time.Minute, Protocol: backend.Protocol})
		t.Cleanup(func() { _ = c.Close() })
		return &Redis{Client: c, Prefix: Unique("swt"), URL: "redis://" + mr.Addr() + "/0", Mini: mr}
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("%s: %v", EnvRedis, err)
	}
	// A 10k-goroutine race must wait for a connection, never time out into a wrong answer.
	opt.PoolSize = 256
	opt.PoolTimeout = time.Minute
	opt.Protocol = backend.Protocol // as the service speaks
	c := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("redis at %s unreachable: %v", url, err)
	}
	prefix := Unique("swt")
	t.Cleanup(func() {
		deleteKeys(c, prefix+":*")
		_ = c.Close()
	})
	return &Redis{Client: c, Prefix: prefix, URL: url}
}

// DeleteQueueKeys removes the Asynq keys of queue from a shared Redis (Asynq ignores our prefix).
func (r *Redis) DeleteQueueKeys(queue string) {
	if r.Mini == nil {
		deleteKeys(r.Client, "asynq:{"+queue+"}:*")
	}
}

func deleteKeys(c *redis.Client, pattern string) {
	ctx := context.Background()
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 1000 {
			c.Del(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		c.Del(ctx, batch...)
	}
}

// DB is a test's database with its schema migrated.
type DB struct {
	Gorm  *gorm.DB
	DSN   string // for MySQL: the DSN of the test's own database; for SQLite: the file path
	MySQL bool
}

// NewDB returns a fresh, migrated database for one test, dropped when it ends.
func NewDB(t testing.TB) *DB {
	t.Helper()
	dsn := os.Getenv(EnvMySQL)
	if dsn == "" {
		if required() {
			t.Fatalf("%s=1 but %s is not set", EnvRequire, EnvMySQL)
		}
		path := filepath.Join(t.TempDir(), "test.db")
		db, err := models.OpenSQLite(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := models.Migrate(context.Background(), db); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeDB(db) })
		return &DB{Gorm: db, DSN: path}
	}
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("%s: %v", EnvMySQL, err)
	}
	admin, err := models.OpenMySQL(dsn, models.Pool{})
	if err != nil {
		t.Fatalf("mysql at %s unreachable: %v", cfg.Addr, err)
	}
	name := Unique("swt_")
	if err := admin.Exec("CREATE DATABASE " + name).Error; err != nil {
		t.Fatalf("mysql at %s: create database: %v", cfg.Addr, err)
	}
	cfg.DBName = name
	testDSN := cfg.FormatDSN()
	db, err := models.OpenMySQL(testDSN, models.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	if err := models.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		closeDB(db)
		_ = admin.Exec("DROP DATABASE IF EXISTS " + name).Error
		closeDB(admin)
	})
	return &DB{Gorm: db, DSN: testDSN, MySQL: true}
}

func closeDB(db *gorm.DB) {
	if sqlDB, err := db.DB(); err == nil {
		_ = sqlDB.Close()
	}
}

// Describe names the backends in use, for test logs.
func Describe() string {
	parts := []string{"sqlite", "miniredis"}
	if os.Getenv(EnvMySQL) != "" {
		parts[0] = "mysql"
	}
	if os.Getenv(EnvRedis) != "" {
		parts[1] = "redis"
	}
	return strings.Join(parts, "+")
}

// VenuePattern matches every key the engine under prefix keeps for one venue, for tests that make
// Redis lose a venue's data.
func VenuePattern(prefix string, venueID uint64) string {
	return redisstore.NewKeys(prefix).VenuePattern(venueID)
}

// AliveKey is the key by which the engine under prefix tells that Redis kept the data of queue.
func AliveKey(prefix, queue string) string { return redisstore.NewKeys(prefix).Alive(queue) }
