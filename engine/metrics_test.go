package engine

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/internal/redisstore"
)

// The tests in this file read exact changes of process-wide counters, so they do not call
// t.Parallel: Go runs parallel tests only once every sequential one has finished, so nothing else
// moves the counters while they run.

// series gathers g as /metrics does and answers the value of the series name{labels} (a counter's or
// a gauge's), and whether it exists.
func series(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if got := labelsOf(m); len(got)+len(labels) > 0 && !reflect.DeepEqual(got, labels) {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func labelsOf(m *dto.Metric) map[string]string {
	if len(m.GetLabel()) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// releaseSeries is the value of the series name{labels} of engine/release's metrics, which it registers
// with the default registry.
func releaseSeries(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := series(t, prometheus.DefaultGatherer, name, labels)
	require.True(t, ok, "%s%v", name, labels)
	return v
}

func lagHistogram(t *testing.T) (count uint64, sum float64) {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "slotwheel_release_lag_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatal("no slotwheel_release_lag_seconds")
	return 0, 0
}

// What an operator watches of releases, read as a scrape reads it: an overdue booking shows in
// the overdue gauges with its age; once released, the gauges are back at zero, the release counts
// once (released, units restored, CONFIRMED → RELEASED) and the lag histogram holds its lateness.
// A release that fails counts as a failure, and a snapshot that cannot be read keeps its last
// values with the time they were read.
func TestReleaseMetricsAnOperatorWatches(t *testing.T) {
	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	b := tb.book(t, alice, res, at("11:00"))
	require.True(t, b.ReleaseAt.Equal(at("11:15")))

	stats := tb.e.statsCollector()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(stats))
	overdue := func() (n, age float64) {
		t.Helper()
		n, ok := series(t, reg, "slotwheel_bookings_overdue", nil)
		require.True(t, ok)
		age, ok = series(t, reg, "slotwheel_bookings_overdue_seconds", nil)
		require.True(t, ok)
		return n, age
	}

	tb.clock.Set(at("11:15").Add(-time.Millisecond))
	require.NoError(t, stats.Refresh(ctx))
	n, age := overdue()
	require.Zero(t, n, "not overdue a millisecond before release_at")
	require.Zero(t, age)

	// Nothing released it (no sweep, no task) for 90 s.
	tb.clock.Set(at("11:16").Add(30 * time.Second))
	require.NoError(t, stats.Refresh(ctx))
	n, age = overdue()
	require.Equal(t, 1.0, n)
	require.InDelta(t, 90, age, 0.001)
	readAt, ok := series(t, reg, "slotwheel_snapshot_last_success_timestamp_seconds", map[string]string{"snapshot": "bookings"})
	require.True(t, ok)
	require.InDelta(t, float64(time.Now().Unix()), readAt, 5, "wall time, which Prometheus compares with time()")

	releases := func() float64 {
		return releaseSeries(t, "slotwheel_releases_total", map[string]string{"outcome": "released"})
	}
	units := func() float64 { return releaseSeries(t, "slotwheel_units_restored_total", nil) }
	failures := func() float64 { return releaseSeries(t, "slotwheel_release_failures_total", nil) }
	toReleased := metricTransitions.WithLabelValues(string(booking.Confirmed), string(booking.Released))
	released0, units0, trans0, failed0 := releases(), units(), counterValue(toReleased), failures()
	lagN0, lagSum0 := lagHistogram(t)
	got, err := tb.e.ReleaseDue(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, got)
	require.Equal(t, 1.0, releases()-released0, "releases done")
	require.Equal(t, 1.0, units()-units0, "units restored")
	require.Equal(t, 1.0, counterValue(toReleased)-trans0, "CONFIRMED → RELEASED")
	require.Equal(t, 0.0, failures()-failed0)
	lagN, lagSum := lagHistogram(t)
	require.Equal(t, uint64(1), lagN-lagN0, "one release observed")
	require.InDelta(t, 90, lagSum-lagSum0, 0.001, "its lag is how late it came")

	// A repeated release restores nothing more.
	out, err := tb.e.Release(ctx, release.Ref{BookingID: b.ID, ReleaseAt: b.ReleaseAt})
	require.NoError(t, err)
	require.Equal(t, release.AlreadyReleased, out)
	require.Equal(t, 1.0, units()-units0)

	require.NoError(t, stats.Refresh(ctx))
	n, age = overdue()
	require.Zero(t, n, "released: nothing overdue")
	require.Zero(t, age)

	// SQL goes away with a booking due: the release fails and says so, and the snapshot keeps
	// its last values and their time.
	tb.book(t, alice, res, at("12:00"))
	tb.clock.Set(at("12:16"))
	sqlDB, err := tb.db.Gorm.DB()
	require.NoError(t, err)
	require.NoError(t, sqlDB.Close())
	_, err = tb.e.ReleaseDue(ctx, 0)
	require.Error(t, err)
	require.Equal(t, 1.0, failures()-failed0, "release failures")
	before, _ := series(t, reg, "slotwheel_snapshot_last_success_timestamp_seconds", map[string]string{"snapshot": "bookings"})
	require.Error(t, stats.Refresh(ctx))
	after, _ := series(t, reg, "slotwheel_snapshot_last_success_timestamp_seconds", map[string]string{"snapshot": "bookings"})
	require.Equal(t, before, after, "a failed read does not look fresh")
	n, _ = overdue()
	require.Zero(t, n, "the last values read")
}

// booking_transitions_total carries exactly the domain's transitions (and the creation), each from
// the start, so that a rate over any of them is 0 rather than missing. Creating a booking counts
// HELD → CONFIRMED; a reschedule, which keeps the booking CONFIRMED, counts as a reschedule only.
func TestTransitionsCarryTheDomainsLabels(t *testing.T) {
	want := map[[2]string]bool{}
	for _, tr := range append(booking.Transitions(), booking.Creations()...) {
		want[[2]string{string(tr.From), string(tr.To)}] = true
	}
	require.Len(t, want, len(booking.Transitions())+len(booking.Creations()))
	pairs := func() map[[2]string]bool {
		mfs, err := prometheus.DefaultGatherer.Gather()
		require.NoError(t, err)
		got := map[[2]string]bool{}
		for _, mf := range mfs {
			if mf.GetName() == "slotwheel_booking_transitions_total" {
				for _, m := range mf.GetMetric() {
					l := labelsOf(m)
					got[[2]string{l["from"], l["to"]}] = true
				}
			}
		}
		return got
	}
	require.Equal(t, want, pairs(), "every transition of the domain, and nothing else")

	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	created := metricTransitions.WithLabelValues(string(booking.Created.From), string(booking.Created.To))
	created0, moved0 := counterValue(created), counterValue(metricReschedules)
	b := tb.book(t, alice, res, at("14:00"))
	require.Equal(t, 1.0, counterValue(created)-created0, "HELD → CONFIRMED")
	_, err := tb.e.Reschedule(ctx, alice, RescheduleRequest{BookingID: b.ID, Start: at("15:00"), End: at("16:00")})
	require.NoError(t, err)
	require.Equal(t, 1.0, counterValue(metricReschedules)-moved0)
	require.Equal(t, want, pairs(), "a reschedule adds no status of its own")
}

// Every count of a reconciliation report that is a repair has its own kind, registered before it
// first happens; a counter found wrong in Redis is repaired and counted as counter drift.
func TestEveryRepairKindIsCounted(t *testing.T) {
	kinds := map[string]bool{}
	fields := reflect.TypeFor[ReconcileReport]()
	for i := range fields.NumField() {
		if name := fields.Field(i).Name; name == "InventoryDays" || name == "SlotsOverCapacity" {
			continue // routine, or a finding (a gauge of its own), not a repair
		}
		var rep ReconcileReport
		reflect.ValueOf(&rep).Elem().Field(i).SetInt(1)
		var hit []string
		for _, r := range rep.repairs() {
			if r.n == 1 {
				hit = append(hit, r.kind)
			}
		}
		require.Len(t, hit, 1, "ReconcileReport.%s needs a kind of its own in repairs()", fields.Field(i).Name)
		require.False(t, kinds[hit[0]], "kind %s named twice", hit[0])
		kinds[hit[0]] = true
	}
	kinds[repairRedisLost], kinds[repairRedisFailover] = true, true
	for k := range kinds {
		_, ok := series(t, prometheus.DefaultGatherer, "slotwheel_reconcile_repairs_total", map[string]string{"kind": k})
		require.True(t, ok, "kind %s is exported before its first repair", k)
	}

	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 2, 60, "08:00", "22:00")
	tb.book(t, alice, res, at("11:00"))
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, at("11:00")))
	used := tb.e.rs.Keys().Venue(res.VenueID).Used()
	require.NoError(t, tb.redis.Client.HSet(ctx, used, redisstore.SlotField(res.ID, at("11:00").Unix()/60), 2).Err())
	drift := metricRepairs.WithLabelValues("counter_drift")
	drift0 := counterValue(drift)
	rep, err := tb.e.Reconcile(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.CounterDrift)
	require.Equal(t, 1.0, counterValue(drift)-drift0, "the drift alert sees it")
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, at("11:00")), "repaired")
}
