package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/internal/testenv/fleet"
	"github.com/slotwheel/slotwheel/internal/testenv/redistest"
)

// venues is how many venues the wheel's cost is measured with.
const venues = 10_000

// wheelSweepEvery is the engine's default period of the wheel's look at every venue
// (engine.LoopsConfig.WheelSweepInterval).
const wheelSweepEvery = 30 * time.Second

// Three instances with 10,000 venues and no live hold cost Redis no more than twice what one
// instance costs: the wheel and the sweeps run on one instance at a time (leases), so what grows
// with instances is only each one's own upkeep. Counted with INFO commandstats on every master, over
// a window that holds exactly one sweep of every venue in both runs.
func TestWheelCostDoesNotGrowWithInstances(t *testing.T) {
	needServers(t)
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := context.Background()
	for i := 0; i < venues; i += 1000 {
		var sb strings.Builder
		sb.WriteString("INSERT INTO venues (name, timezone, release_mode, created_at) VALUES ")
		for j := range 1000 {
			if j > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, "('v%d', 'Asia/Shanghai', '', NOW(3))", i+j)
		}
		require.NoError(t, db.Gorm.WithContext(ctx).Exec(sb.String()).Error)
	}

	// Both runs at once, each on a cluster of its own: what is counted is commands, which a busy
	// machine slows but does not add to, and the suite is not kept waiting twice.
	var one, three cost
	t.Run("measure", func(t *testing.T) {
		t.Run("1 instance", func(t *testing.T) {
			t.Parallel()
			one = wheelCost(t, redistest.StartCluster(t), db.DSN, 1)
		})
		t.Run("3 instances", func(t *testing.T) {
			t.Parallel()
			three = wheelCost(t, redistest.StartCluster(t), db.DSN, 3)
		})
	})
	if t.Failed() {
		return
	}
	t.Logf("Redis commands/s with %d venues, no live holds — 1 instance: %.0f %v; 3 instances: %.0f %v; ratio %.2f",
		venues, one.rate, one.perMaster, three.rate, three.perMaster, three.rate/one.rate)
	require.Equal(t, 1, one.sweeps, "one sweep of every venue in the window with one instance")
	require.Equal(t, 1, three.sweeps, "one sweep of every venue in the window with three instances, not three")
	require.LessOrEqual(t, three.rate, 2*one.rate, "three instances cost Redis at most twice what one does")
}

type cost struct {
	rate      float64            // commands per second, all masters
	perMaster map[string]float64 // commands per second by master
	sweeps    int                // runs of the wheel sweep in the window, all instances
}

// wheelCost starts n instances on the cluster and the database, waits until their start-up work
// is done, and counts the commands every master runs over a window of one sweep period and the
// sweep that falls in it; then it stops them.
func wheelCost(t *testing.T, cluster *redistest.Cluster, dsn string, n int) cost {
	t.Helper()
	f := fleet.New(t, fleet.Options{MySQLDSN: dsn, Redis: fleet.ClusterRedis(cluster)})
	for range n {
		f.Launch(fleet.InstanceOptions{})
	}
	f.WaitReady(t)
	// The start-up reconciliation's background part is not what is measured.
	waitFor(t, 2*time.Minute, func() (bool, string) {
		for _, in := range f.Instances() {
			if in.CountLines("msg=reconciled") > 0 {
				return true, ""
			}
		}
		return false, "no instance finished its start-up reconciliation"
	})
	// The first sweep comes one period after the loops started (just before the instance served):
	// the window opens before it and closes once it is long done.
	window := wheelSweepEvery + 10*time.Second
	sweeps0 := sweepRuns(t, f)
	calls0 := commandCalls(t, cluster)
	began := time.Now()
	time.Sleep(window)
	calls1 := commandCalls(t, cluster)
	elapsed := time.Since(began).Seconds()
	sweeps1 := sweepRuns(t, f)
	var wg sync.WaitGroup
	for _, in := range f.Instances() {
		wg.Go(func() { require.NoError(t, in.Term()) })
	}
	wg.Wait()

	c := cost{perMaster: map[string]float64{}, sweeps: sweeps1 - sweeps0}
	for addr, calls := range calls1 {
		r := float64(calls-calls0[addr]) / elapsed
		c.perMaster[addr] = float64(int(r))
		c.rate += r
	}
	return c
}

// sweepRuns sums the runs of the wheel sweep over the instances.
func sweepRuns(t *testing.T, f *fleet.Fleet) int {
	t.Helper()
	total := 0
	for _, in := range f.Instances() {
		v, _, err := in.Metric(context.Background(), "slotwheel_loop_runs_total", map[string]string{"loop": "wheel_sweep", "outcome": "ok"})
		require.NoError(t, err)
		total += int(v)
	}
	return total
}

// commandCalls sums, by master, the calls of every command but INFO itself (the measuring).
func commandCalls(t *testing.T, cluster *redistest.Cluster) map[string]int64 {
	t.Helper()
	byAddr, err := redistest.CommandCalls(context.Background(), cluster.Masters())
	require.NoError(t, err)
	out := map[string]int64{}
	for addr, calls := range byAddr {
		for _, n := range calls {
			out[addr] += n
		}
	}
	return out
}
