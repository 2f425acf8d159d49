package release

import (
	"context"
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// Metrics are package-level so that several services in one process (tests) share one
// registration. Every label value they can take is registered up front, so that a dashboard or an
// alert sees a zero rather than nothing.
var (
	// One histogram for every release, with buckets from a hot venue's 5 ms to the hour a long
	// outage may cost, so that one p99 reads right both in normal running and in a recovery.
	metricLag = promauto.NewHistogram(prometheus.HistogramOpts{
		Name: "slotwheel_release_lag_seconds", Help: "Seconds between a booking's release_at and its release.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600},
	})
	metricFailures = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_release_failures_total", Help: "Release runs (of the release loop, a release task or reconciliation) that failed; their bookings stay CONFIRMED until a later run releases them.",
	})
	metricUnitsRestored = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_units_restored_total", Help: "Released bookings whose units the release gave back to inventory, each once; short of slotwheel_releases_total{outcome=\"released\"} by the units a failed give-back left to a redelivered task or to reconciliation.",
	})
	metricReleases = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_releases_total", Help: "Release decisions by outcome: released, held_dry_run (decided, announced as booking.release_skipped, units kept), held_off.",
	}, []string{"outcome"})
	metricMode = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "slotwheel_venue_release_mode", Help: "A venue's release mode: 1 for the mode it is in, 0 for the others (as last read by this instance).",
	}, []string{"venue_id", "mode"})
)

func init() {
	for _, o := range []string{"released", "held_dry_run", "held_off"} {
		metricReleases.WithLabelValues(o)
	}
}

// countFailure counts a failed release attempt. A cancelled context is a shutdown or a caller that
// gave up, not a failure of the release; a deadline is counted (the backend was slow).
func countFailure(err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		metricFailures.Inc()
	}
}

// ObserveMode shows a venue's release mode in metrics: 1 for its mode, 0 for the others. A batch
// does as it reads the mode; an admin's change of the mode (engine's SetReleaseMode) does at once.
func ObserveMode(venueID uint64, m booking.ReleaseMode) {
	v := strconv.FormatUint(venueID, 10)
	for _, x := range []booking.ReleaseMode{booking.ReleaseOn, booking.ReleaseOff, booking.ReleaseDryRun} {
		val := 0.0
		if x == m {
			val = 1
		}
		metricMode.WithLabelValues(v, string(x)).Set(val)
	}
}
