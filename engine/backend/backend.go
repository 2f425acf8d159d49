// Package backend opens slotwheel's stores: MySQL or the embedded SQLite file through models/, and a
// Redis server or the embedded in-process miniredis, whose clock it drives (miniredis moves key TTLs
// only when told to). It is used by main and by tools; engine/ itself receives open handles.
package backend

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/models"
)

// OpenSQL opens and migrates MySQL when dsn is set, else the SQLite file at sqlitePath.
func OpenSQL(dsn, sqlitePath string) (*gorm.DB, error) {
	var db *gorm.DB
	var err error
	if dsn != "" {
		db, err = models.OpenMySQL(dsn)
	} else {
		db, err = models.OpenSQLite(sqlitePath)
	}
	if err != nil {
		return nil, err
	}
	if err := models.Migrate(db); err != nil {
		return nil, err
	}
	return db, nil
}

// Redis is an open Redis: a client, the options Asynq dials with, and (embedded) the server.
type Redis struct {
	Client *redis.Client
	Asynq  asynq.RedisConnOpt
	mini   *miniredis.Miniredis
	stop   chan struct{}
	once   sync.Once
}

// Embedded reports whether this is the in-process Redis.
func (r *Redis) Embedded() bool { return r.mini != nil }

// OpenRedis connects to url, or starts an in-process Redis on a loopback port when url is empty.
func OpenRedis(ctx context.Context, url string) (*Redis, error) {
	if url == "" {
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("start embedded redis: %w", err)
		}
		r := &Redis{
			Client: redis.NewClient(&redis.Options{Addr: mr.Addr(), PoolSize: 128, PoolTimeout: 30 * time.Second}),
			Asynq:  asynq.RedisClientOpt{Addr: mr.Addr()},
			mini:   mr,
			stop:   make(chan struct{}),
		}
		go r.driveClock()
		return r, nil
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("SLOTWHEEL_REDIS_URL: %w", err)
	}
	// Waiting for a pooled connection must outlast bursts: a timeout here would fail a hold.
	if opt.PoolSize < 128 {
		opt.PoolSize = 128
	}
	opt.PoolTimeout = 30 * time.Second
	c := redis.NewClient(opt)
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redis unreachable: %w", err)
	}
	aopt, err := asynq.ParseRedisURI(url)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("SLOTWHEEL_REDIS_URL: %w", err)
	}
	return &Redis{Client: c, Asynq: aopt}, nil
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
