package engine

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/internal/redisstore"
)

// Metrics are package-level so that several engines in one process (tests) share one registration.
// Every label value they can take is registered up front, so that a dashboard or an alert sees a
// zero rather than nothing.
var (
	metricHolds = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_holds_total", Help: "Hold attempts by outcome (ok, full, closed, limit, cold: a day loaded from SQL first).",
	}, []string{"outcome"})
	metricExpired = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_holds_expired_total", Help: "Holds whose units the wheel gave back at their deadline.",
	})
	metricConfirms = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_confirms_total", Help: "Confirms by outcome (booked, retaken, refund, failed, unknown: the commit's acknowledgement was lost).",
	}, []string{"outcome"})
	metricTransitions = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_booking_transitions_total", Help: "Booking status transitions, by from and to status.",
	}, []string{"from", "to"})
	metricReleaseLag = promauto.NewHistogram(prometheus.HistogramOpts{
		Name: "slotwheel_release_lag_seconds", Help: "Seconds between a booking's release_at and its release.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600},
	})
	metricRepairs = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_reconcile_repairs_total", Help: "Repairs made by reconciliation and the sweeps, by kind.",
	}, []string{"kind"})
	metricPromotions = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_waitlist_promotions_total", Help: "Waiters promoted to a hold.",
	})
	metricReleases = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_releases_total", Help: "Release decisions by outcome: released, held_dry_run (decided, announced as booking.release_skipped, units kept), held_off.",
	}, []string{"outcome"})
	metricReleaseMode = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "slotwheel_venue_release_mode", Help: "A venue's release mode: 1 for the mode it is in, 0 for the others (as last read by this instance).",
	}, []string{"venue_id", "mode"})
	metricEventsPublished = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_events_published_total", Help: "Outbox events handed to their sinks by the relay.",
	})
	metricDeliveries = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_deliveries_total", Help: "Delivery attempts by sink (webhook, wechat) and outcome (succeeded, pending: to be retried, failed, skipped).",
	}, []string{"sink", "outcome"})
	metricDeliveriesRequeued = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_deliveries_requeued_total", Help: "Deliveries queued again because their task was lost.",
	})
	metricDeliveryDelay = promauto.NewHistogram(prometheus.HistogramOpts{
		Name: "slotwheel_delivery_delay_seconds", Help: "Seconds from an event's transition to its successful delivery.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400},
	})
	metricOrdersClosed = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_wechatpay_orders_closed_total", Help: "WeChat Pay orders closed because their hold ended unpaid.",
	})
	metricReminders = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_reminders_total", Help: "Reminders sent (booking.reminder events written).",
	})
)

func init() {
	for _, o := range []redisstore.HoldOutcome{redisstore.HoldOK, redisstore.HoldFull, redisstore.HoldClosed, redisstore.HoldLimit, redisstore.HoldCold} {
		metricHolds.WithLabelValues(string(o))
	}
	for _, o := range []string{"booked", "retaken", "refund", "failed", "unknown"} {
		metricConfirms.WithLabelValues(o)
	}
	for _, from := range booking.Statuses() {
		for _, to := range booking.Statuses() {
			if booking.CanMove(from, to) {
				metricTransitions.WithLabelValues(string(from), string(to))
			}
		}
	}
	for _, s := range []string{"webhook", "wechat"} {
		for _, o := range []string{"succeeded", "pending", "failed", "skipped"} {
			metricDeliveries.WithLabelValues(s, o)
		}
	}
	for _, o := range []string{"released", "held_dry_run", "held_off"} {
		metricReleases.WithLabelValues(o)
	}
	for _, k := range []string{"overdue_released", "owners_added", "owners_removed", "counter_drift", "holds_requeued",
		"holds_settled", "tasks_scheduled", "confirming_resumed", "redis_lost"} {
		metricRepairs.WithLabelValues(k)
	}
}
