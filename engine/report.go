package engine

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// What reconciliation and the sweeps repaired, as a report and as the repairs metric.

// ReconcileReport counts what a reconciliation found and repaired.
type ReconcileReport struct {
	OverdueReleased   int
	OwnersAdded       int
	OwnersRemoved     int
	CounterDrift      int
	HoldsRequeued     int
	HoldsSettled      int
	TasksScheduled    int
	InventoryDays     int
	ConfirmingResumed int
	// HoldsRefused are live holds ended because Redis counted their slots over capacity (it had lost
	// writes, and let them through on units that bookings own).
	HoldsRefused int
	// LedgerRepaired are slots whose capacity-ledger count differed from their bookings' units.
	LedgerRepaired int
	// SlotsOverCapacity are slots whose occupying bookings take more units than they have: an
	// oversell, reported (and alerted on), never hidden. A finding, not a repair.
	SlotsOverCapacity int
}

// The metrics of this file (engine.go says why they are package-level).
var (
	metricRepairs = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_reconcile_repairs_total", Help: "Repairs made by reconciliation and the sweeps, by kind.",
	}, []string{"kind"})
)

// Every label value is registered up front (engine.go says why).
func init() {
	for _, r := range (ReconcileReport{}).repairs() {
		metricRepairs.WithLabelValues(r.kind)
	}
	metricRepairs.WithLabelValues(repairRedisLost)
	metricRepairs.WithLabelValues(repairRedisFailover)
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
