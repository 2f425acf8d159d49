package engine

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/redisstore"
)

// Metrics are package-level so that several engines in one process (tests) share one registration.
// Every label value they can take is registered up front, so that a dashboard or an alert sees a
// zero rather than nothing.
var (
	metricHolds = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_holds_total", Help: "Hold attempts by outcome (ok, full, closed, limit, cold: a day loaded from SQL first; done: a repeat of a keyed hold answered as the first time, reused: its key came with another body, running: its first request still ran).",
	}, []string{"outcome"})
	metricExpired = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_holds_expired_total", Help: "Holds whose units the wheel gave back at their deadline.",
	})
	metricConfirms = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_confirms_total", Help: "Confirms by outcome (booked, retaken, refund, refused: the capacity ledger refused the booking, failed, unknown: the commit's acknowledgement was lost).",
	}, []string{"outcome"})
	metricTransitions = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_booking_transitions_total", Help: "Booking status transitions, by from and to status (HELD → CONFIRMED: a booking created).",
	}, []string{"from", "to"})
	metricReschedules = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_reschedules_total", Help: "Bookings moved to another window (they stay CONFIRMED, so this is no status transition).",
	})
	metricRepairs = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_reconcile_repairs_total", Help: "Repairs made by reconciliation and the sweeps, by kind.",
	}, []string{"kind"})
	metricPromotions = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_waitlist_promotions_total", Help: "Waiters promoted to a hold.",
	})
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
	metricSlotsOver = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "slotwheel_slots_over_capacity", Help: "Slots whose occupying bookings take more units than the slot has, as this instance's last check of the capacity ledger found them: an oversell.",
	})
	metricLedgerDrift = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_ledger_drift_total", Help: "Slots whose capacity-ledger count was short of the units a booking change gave back (repaired by reconciliation's check of the ledger).",
	})
)

func init() {
	for _, o := range []redisstore.HoldOutcome{redisstore.HoldOK, redisstore.HoldFull, redisstore.HoldClosed, redisstore.HoldLimit,
		redisstore.HoldCold, redisstore.HoldDone, redisstore.HoldReused, redisstore.HoldRunning} {
		metricHolds.WithLabelValues(string(o))
	}
	for _, o := range []string{"booked", "retaken", "refund", "refused", "failed", "unknown"} {
		metricConfirms.WithLabelValues(o)
	}
	for _, tr := range append(booking.Transitions(), booking.Created) {
		metricTransitions.WithLabelValues(string(tr.From), string(tr.To))
	}
	for _, s := range []string{"webhook", "wechat"} {
		for _, o := range []string{"succeeded", "pending", "failed", "skipped"} {
			metricDeliveries.WithLabelValues(s, o)
		}
	}
	for _, r := range (ReconcileReport{}).repairs() {
		metricRepairs.WithLabelValues(r.kind)
	}
	metricRepairs.WithLabelValues(repairRedisLost)
	metricRepairs.WithLabelValues(repairRedisFailover)
}

// countTransition counts one booking status change.
func countTransition(tr booking.Transition) {
	metricTransitions.WithLabelValues(string(tr.From), string(tr.To)).Inc()
}

// repairRedisLost is the repair kind of a Redis found to have lost its data (and rebuilt);
// repairRedisFailover that of a Redis primary found replaced (a failover, which may have rolled
// acknowledged writes back).
const (
	repairRedisLost     = "redis_lost"
	repairRedisFailover = "redis_failover"
)

// repairCount is one kind of repair and how many a report made.
type repairCount struct {
	kind string
	n    int
}

// repairs are r's counts of repairs under the kind label that slotwheel_reconcile_repairs_total
// shows them with. It is the one list of kinds: init registers each, countRepairs adds under them.
// InventoryDays is left out: generating days ahead is routine, not a repair.
func (r ReconcileReport) repairs() []repairCount {
	return []repairCount{{"overdue_released", r.OverdueReleased}, {"owners_added", r.OwnersAdded},
		{"owners_removed", r.OwnersRemoved}, {"counter_drift", r.CounterDrift}, {"holds_requeued", r.HoldsRequeued},
		{"holds_settled", r.HoldsSettled}, {"tasks_scheduled", r.TasksScheduled}, {"confirming_resumed", r.ConfirmingResumed},
		{"holds_refused", r.HoldsRefused}, {"ledger_repaired", r.LedgerRepaired}}
}

// countRepairs adds the repairs of r to the metrics.
func countRepairs(r ReconcileReport) {
	for _, c := range r.repairs() {
		metricRepairs.WithLabelValues(c.kind).Add(float64(c.n))
	}
}
