package jobs

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/testenv"
)

// queueGauges scrapes reg as /metrics does and answers slotwheel_asynq_tasks by queue and state, and
// the snapshot's last-success timestamp.
func queueGauges(t *testing.T, reg prometheus.Gatherer) (map[[2]string]float64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	tasks := map[[2]string]float64{}
	stamp := -1.0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			switch mf.GetName() {
			case "slotwheel_asynq_tasks":
				tasks[[2]string{l["queue"], l["state"]}] = m.GetGauge().GetValue()
			case "slotwheel_snapshot_last_success_timestamp_seconds":
				require.Equal(t, "asynq_queues", l["snapshot"])
				stamp = m.GetGauge().GetValue()
			}
		}
	}
	require.NotEqual(t, -1.0, stamp, "the snapshot's timestamp is always exported")
	return tasks, stamp
}

// The queue gauges show what the Asynq dashboard shows: a booking's release task is scheduled in
// its release queue; once archived (its retries ran out) the archived gauge of that queue reads 1.
// Queues nobody has used yet read 0 in every state, so every series exists from the start.
func TestQueueGaugesShowArchivedTasks(t *testing.T) {
	t.Parallel()
	b := setup(t, testConfig{engine: engine.Options{DefaultGrace: 10 * time.Minute}})
	ctx := context.Background()
	stats := b.jobs.statsCollector()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(stats))

	require.NoError(t, stats.Refresh(ctx))
	tasks, stamp := queueGauges(t, reg)
	require.Len(t, tasks, len(b.jobs.Queues())*len(taskStates), "every queue in every state")
	for k, v := range tasks {
		require.Zero(t, v, "%v before anything was queued", k)
	}
	require.InDelta(t, float64(time.Now().Unix()), stamp, 5)

	_, resourceID := b.venueWithHall(t, 2)
	bk, err := b.book(ctx, resourceID, "u-gauge")
	require.NoError(t, err)
	q := b.jobs.ReleaseQueue()
	require.NoError(t, stats.Refresh(ctx))
	tasks, _ = queueGauges(t, reg)
	require.Equal(t, 1.0, tasks[[2]string{q, "scheduled"}], "the release task waits for release_at")
	require.Zero(t, tasks[[2]string{q, "archived"}])

	require.NoError(t, b.inspector.ArchiveTask(q, ReleaseTaskID(refOf(bk))))
	require.NoError(t, stats.Refresh(ctx))
	tasks, _ = queueGauges(t, reg)
	require.Equal(t, 1.0, tasks[[2]string{q, "archived"}], "the dead letter shows")
	require.Zero(t, tasks[[2]string{q, "scheduled"}])
	require.Zero(t, tasks[[2]string{b.jobs.MaintQueue(), "archived"}], "other queues are apart")

	// Its booking still waits, so the archived_releases loop leaves it for an operator; once the
	// booking no longer waits (cancelled), the loop deletes it and the gauge follows.
	require.NoError(t, b.jobs.runLoop(ctx, "archived_releases"))
	require.NoError(t, stats.Refresh(ctx))
	tasks, _ = queueGauges(t, reg)
	require.Equal(t, 1.0, tasks[[2]string{q, "archived"}], "left for the operator")
	_, err = b.eng.CancelBooking(ctx, booking.Actor{UserID: "ops", Role: booking.RoleAdmin}, bk.ID)
	require.NoError(t, err)
	require.NoError(t, b.jobs.runLoop(ctx, "archived_releases"))
	require.NoError(t, stats.Refresh(ctx))
	tasks, _ = queueGauges(t, reg)
	require.Zero(t, tasks[[2]string{q, "archived"}])
}

// A Redis that accepts connections and never answers does not hold a scrape: it answers within
// about a second, without queue gauges (never read) and with the timestamp at 0.
func TestQueueGaugesNeverHoldTheScrape(t *testing.T) {
	t.Parallel()
	silent := testenv.SilentServer(t)
	b := setup(t, testConfig{})
	// The reading left hanging fails after the test has ended; its warning goes nowhere.
	j, err := New(Options{Redis: asynq.RedisClientOpt{Addr: silent}, Engine: b.eng, Queue: testenv.Unique("q"),
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(j.Stop)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(j.StatsCollector()))

	began := time.Now()
	tasks, stamp := queueGauges(t, reg)
	require.Less(t, time.Since(began), 3*time.Second, "the scrape answered without waiting for Redis")
	require.Empty(t, tasks)
	require.Zero(t, stamp, "never read")
}
