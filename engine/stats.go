package engine

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slotwheel/slotwheel/engine/snapshot"
)

// The overdue gauges: what the "no lost release" invariant looks like from outside. The release
// loop releases due bookings within seconds whatever happened to their tasks, so a count that stays
// above zero, or an oldest age past a minute, means releases are not happening.
var (
	descOverdue = prometheus.NewDesc("slotwheel_bookings_overdue",
		"CONFIRMED bookings past their release_at whose release is still undecided, from SQL (a snapshot, refreshed at most every 10 s).",
		nil, nil)
	descOverdueAge = prometheus.NewDesc("slotwheel_bookings_overdue_seconds",
		"How far past its release_at the oldest overdue CONFIRMED booking is; 0 when none is.", nil, nil)
)

// StatsCollector exports the gauges of the engine that cost a SQL query to read (overdue bookings)
// as a snapshot: a scrape reads SQL at most every 10 s and never waits on it more than a second.
// Each call builds a collector with its own snapshot; a process registers one.
func (u *Upkeep) StatsCollector() prometheus.Collector {
	return u.statsCollector()
}

func (u *Upkeep) statsCollector() *snapshot.Collector {
	return snapshot.New(snapshot.Config{Name: "bookings", Descs: []*prometheus.Desc{descOverdue, descOverdueAge}, Logger: u.log},
		u.readOverdue)
}

func (u *Upkeep) readOverdue(ctx context.Context) ([]snapshot.Value, error) {
	now := u.clock.Now()
	n, oldest, err := u.ss.OverdueStats(ctx, now)
	if err != nil {
		return nil, err
	}
	return []snapshot.Value{
		{Desc: descOverdue, Value: float64(n)},
		{Desc: descOverdueAge, Value: max(now.Sub(oldest).Seconds(), 0)},
	}, nil
}
