package jobs

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics live on the default registry, registered once for the process however many Jobs it builds.
var (
	releaseLag = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "slotwheel_release_lag_seconds",
		Help:    "Seconds between a booking's release_at and the moment it was released.",
		Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	})
	releases = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_release_tasks_total",
		Help: "Release task runs by outcome: released, already_released, not_applicable, early (handed back to the queue), error, bad_payload.",
	}, []string{"outcome"})
	tasksScheduled = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_tasks_scheduled_total",
		Help: "Tasks put into Asynq by type; result already_queued when a task with the same ID was there.",
	}, []string{"type", "result"})
	loaderBatch = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "slotwheel_release_loader_batch",
		Help: "Bookings the release loader found due within the horizon in its last batch.",
	})
	loaderRuns = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_release_loader_runs_total",
		Help: "Release loader runs by result (ok, error).",
	}, []string{"result"})
)
