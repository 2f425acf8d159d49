package engine

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// The metrics of this file (engine.go says why they are package-level): every booking status change,
// counted by whoever makes it (a change through Bookings.apply, a confirm, a release batch).
var (
	metricTransitions = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_booking_transitions_total", Help: "Booking status transitions, by from and to status (HELD → CONFIRMED: a booking created).",
	}, []string{"from", "to"})
)

// Every label value is registered up front (engine.go says why).
func init() {
	for _, tr := range append(booking.Transitions(), booking.Creations()...) {
		metricTransitions.WithLabelValues(string(tr.From), string(tr.To))
	}
}

// countTransition counts one booking status change.
func countTransition(tr booking.Transition) {
	metricTransitions.WithLabelValues(string(tr.From), string(tr.To)).Inc()
}
