package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/internal/testenv/fleet"
)

// Four instances started at once on an empty database with SLOTWHEEL_AUTO_MIGRATE: one creates the
// schema and one repairs Redis; the others wait for them and skip both, then all serve. An instance
// restarted afterwards repairs Redis again (it may replace one that died), and leaves the schema be.
func TestInstancesStartingTogetherMigrateAndReconcileOnce(t *testing.T) {
	needServers(t)
	t.Parallel()
	const n = 4
	f := fleet.New(t, fleet.Options{MySQLDSN: fleet.NewDatabase(t, os.Getenv(testenv.EnvMySQL)), NoMigrate: true,
		Env: []string{"SLOTWHEEL_AUTO_MIGRATE=true"}})
	for range n {
		f.Launch(fleet.InstanceOptions{})
	}
	f.WaitReady(t)
	count := func(s string) int {
		total := 0
		for _, in := range f.Instances() {
			total += in.CountLines(s)
		}
		return total
	}
	require.Equal(t, 1, count(`msg="schema migrated"`), "one instance migrates")
	require.Equal(t, n-1, count("schema already up to date; not migrated"))
	require.Equal(t, 1, count("counters reconciled; serving"), "one instance repairs Redis at start")
	require.Equal(t, n-1, count("start-up reconciliation already done by another instance"))

	// Every instance serves on the schema the first one made.
	ctx := context.Background()
	court, err := f.Client(0).NewCourt(ctx, fleet.CourtSpec{Capacity: n, MinLeft: 5 * time.Minute})
	require.NoError(t, err)
	for i := range n {
		c := f.Client(i)
		h, err := c.Hold(ctx, f.Token(fmt.Sprintf("starter-%d", i), "user", ""), court.Resource.ID, court.Start, court.End, 1)
		require.NoError(t, err)
		p, err := c.Pay(ctx, h, testenv.Unique("pay-"))
		require.NoError(t, err)
		require.Equal(t, "booked", p.Outcome)
	}

	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	late := f.Instance(1)
	require.NoError(t, late.Restart(rctx))
	require.Equal(t, 1, count(`msg="schema migrated"`), "a restart finds the schema current")
	require.Equal(t, 2, late.CountLines("counters reconciled; serving")+late.CountLines("already done by another instance"))
	require.Equal(t, 2, count("counters reconciled; serving"), "an instance that starts later repairs again")
	require.NoError(t, f.Audit(ctx))
}
