package engine

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics are package-level so that several engines in one process (tests) share one registration.
var (
	metricHolds = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_holds_total", Help: "Hold attempts by outcome (ok, full, closed).",
	}, []string{"outcome"})
	metricExpired = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_holds_expired_total", Help: "Holds expired by the wheel ticker.",
	})
	metricWheelTick = promauto.NewHistogram(prometheus.HistogramOpts{
		Name: "slotwheel_wheel_tick_seconds", Help: "Duration of one wheel tick.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	})
	metricConfirms = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_confirms_total", Help: "Confirms by outcome (booked, retaken, refund, failed).",
	}, []string{"outcome"})
	metricTransitions = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_booking_transitions_total", Help: "Booking status transitions.",
	}, []string{"from", "to"})
	metricReleaseLag = promauto.NewHistogram(prometheus.HistogramOpts{
		Name: "slotwheel_engine_release_lag_seconds", Help: "Time between a booking's release_at and its release.",
		Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 60, 600},
	})
	metricDrift = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_reconcile_repairs_total", Help: "Repairs made by reconciliation, by kind.",
	}, []string{"kind"})
)
