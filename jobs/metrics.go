package jobs

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics live on the default registry, registered once for the process however many Jobs it builds.
// Release lag is the engine's (slotwheel_release_lag_seconds), measured where the release commits.
var (
	releases = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_release_tasks_total",
		Help: "Release task runs by outcome: released, already_released, not_applicable, settled (the release loop had decided it), early (handed back to the queue), error, bad_payload.",
	}, []string{"outcome"})
	tasksScheduled = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_tasks_scheduled_total",
		Help: "Tasks put into Asynq by type; result already_queued when a task with the same ID was there.",
	}, []string{"type", "result"})
	archivedResolved = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_archived_release_tasks_resolved_total",
		Help: "Archived (dead-letter) release tasks resolved: deleted (the booking no longer waits for that release).",
	}, []string{"action"})
	loaderBatch = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "slotwheel_release_loader_batch",
		Help: "Bookings the release loader found due within the horizon in its last batch.",
	})
)

func init() {
	for _, o := range []string{"released", "already_released", "not_applicable", "settled", "early", "error", "bad_payload"} {
		releases.WithLabelValues(o)
	}
	for _, a := range []string{"deleted"} {
		archivedResolved.WithLabelValues(a)
	}
	for _, t := range []string{TypeRelease, TypeReconcile} {
		for _, r := range []string{"enqueued", "already_queued"} {
			tasksScheduled.WithLabelValues(t, r)
		}
	}
}
