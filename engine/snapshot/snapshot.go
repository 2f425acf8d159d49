// Package snapshot exports values that cost a backend round trip to read — Asynq's queue depths,
// the overdue bookings in SQL — as Prometheus gauges, without putting that round trip on the
// scrape. A scrape answers the last snapshot and, when it is older than MaxAge, starts one refresh
// in the background and waits for it at most Wait: a slow or unreachable backend costs a scrape at
// most Wait, never a hang, and shows as a last-success timestamp that stops moving (which an alert
// can watch). Only scrapes cause reads, so an instance nobody scrapes costs its backends nothing.
//
// It imports no slotwheel package. Its timestamps are wall time, because Prometheus compares them
// with its own time().
package snapshot

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Value is one gauge reading: Labels are the Desc's variable label values, in order.
type Value struct {
	Desc   *prometheus.Desc
	Value  float64
	Labels []string
}

// ReadFunc reads every value of a snapshot. It answers all of them or an error: a partial reading
// would show some gauges fresh and others silently old.
type ReadFunc func(ctx context.Context) ([]Value, error)

// Config configures a Collector. Zero durations take the documented defaults.
type Config struct {
	// Name tells the snapshot's own series and logs apart ("asynq_queues"). Required.
	Name string
	// Descs are every gauge the ReadFunc may answer. Required.
	Descs []*prometheus.Desc
	// MaxAge is how old a snapshot may be before a scrape refreshes it; default 10s, so that a
	// Prometheus scraping every 15 s reads each backend about once per scrape.
	MaxAge time.Duration
	// Wait is how long a scrape waits for the refresh it started before answering with the values
	// it has; default 1s, well within any scrape timeout.
	Wait time.Duration
	// Timeout bounds one refresh; default 10s.
	Timeout time.Duration
	// Logger receives failed refreshes; default slog.Default().
	Logger *slog.Logger
}

// Collector is a prometheus.Collector of one snapshot. It is safe for concurrent use.
type Collector struct {
	cfg         Config
	read        ReadFunc
	lastSuccess *prometheus.Desc

	mu      sync.Mutex
	values  []Value
	readAt  time.Time     // when values were read; zero: never
	tried   time.Time     // when the last refresh started
	running chan struct{} // closed when the background refresh in flight ends; nil: none
	// started counts refreshes begun and stored is the number of the one whose values are kept, so
	// that a slow refresh finishing after a newer one cannot put older values back.
	started, stored uint64
}

// New builds a Collector; nothing is read until a scrape or Refresh.
func New(cfg Config, read ReadFunc) *Collector {
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 10 * time.Second
	}
	if cfg.Wait <= 0 {
		cfg.Wait = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Collector{cfg: cfg, read: read, lastSuccess: prometheus.NewDesc(
		"slotwheel_snapshot_last_success_timestamp_seconds",
		"When the values of a snapshot (gauges read from a backend off the scrape path) were last read successfully, "+
			"in unix seconds; 0 before the first success. A value that stops moving means the gauges are stale.",
		nil, prometheus.Labels{"snapshot": cfg.Name})}
}

// Refresh reads the snapshot now, bounded by Timeout, and keeps the values if no newer reading is
// kept already.
func (c *Collector) Refresh(ctx context.Context) error {
	c.mu.Lock()
	c.started++
	n := c.started
	c.tried = time.Now()
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	values, err := c.read(ctx)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", c.cfg.Name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n > c.stored {
		c.values, c.readAt, c.stored = values, time.Now(), n
	}
	return nil
}

// Describe sends the descriptors of every gauge of the snapshot and of its timestamp.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.cfg.Descs {
		ch <- d
	}
	ch <- c.lastSuccess
}

// Collect sends the snapshot's values, refreshing them first (waiting at most Wait) when they are
// older than MaxAge.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if done := c.refreshIfStale(); done != nil {
		t := time.NewTimer(c.cfg.Wait)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
	c.mu.Lock()
	values, readAt := c.values, c.readAt
	c.mu.Unlock()
	for _, v := range values {
		m, err := prometheus.NewConstMetric(v.Desc, prometheus.GaugeValue, v.Value, v.Labels...)
		if err != nil {
			m = prometheus.NewInvalidMetric(v.Desc, err) // a bug in a ReadFunc: the scrape says so
		}
		ch <- m
	}
	ts := 0.0
	if !readAt.IsZero() {
		ts = float64(readAt.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(c.lastSuccess, prometheus.GaugeValue, ts)
}

// refreshIfStale starts a background refresh when none runs and the last one started more than
// MaxAge ago, and answers the channel closed when the refresh in flight ends (nil: none runs).
// A refresh runs detached from the scrape that started it, so that a scrape giving up on a slow
// backend does not waste the reading for the next one.
func (c *Collector) refreshIfStale() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running != nil {
		return c.running
	}
	if !c.tried.IsZero() && time.Since(c.tried) < c.cfg.MaxAge {
		return nil
	}
	done := make(chan struct{})
	c.running = done
	c.tried = time.Now()
	go func() {
		err := c.Refresh(context.Background())
		if err != nil {
			c.cfg.Logger.Warn("metrics snapshot refresh failed; its gauges keep their last values", "err", err)
		}
		c.mu.Lock()
		c.running = nil
		c.mu.Unlock()
		close(done)
	}()
	return done
}
