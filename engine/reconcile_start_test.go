package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Instances that start together repair Redis once between them; one that starts after that repair
// repairs again (it may replace a process that died after it), and so does any instance once Redis
// lost the markers.
func TestReconcileAtStartRunsOnceForInstancesStartingTogether(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	b := tb.book(t, alice, res, at("11:00"))
	// Redis lost the venue: whoever repairs must count the booking again.
	tb.wipeRedis(t, res.VenueID)

	started := tb.clock.Now()
	const instances = 5
	outcomes := make([]StartupOutcome, instances)
	errs := make([]error, instances)
	var wg sync.WaitGroup
	for i := range instances {
		e, err := New(tb.opts)
		require.NoError(t, err)
		wg.Go(func() { outcomes[i], errs[i] = e.ReconcileAtStart(ctx, started) })
	}
	wg.Wait()
	ran := 0
	for i := range instances {
		require.NoError(t, errs[i])
		if outcomes[i].Ran {
			ran++
			require.Equal(t, 1, outcomes[i].Report.OwnersAdded, "the booking counted again")
		}
	}
	require.Equal(t, 1, ran, "one of the instances starting together repairs")
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, b.Start))

	// An instance that starts after that repair began repairs again.
	tb.clock.Advance(time.Second)
	later, err := New(tb.opts)
	require.NoError(t, err)
	out, err := later.ReconcileAtStart(ctx, tb.clock.Now())
	require.NoError(t, err)
	require.True(t, out.Ran)

	// Markers gone (Redis lost its data): even an instance that started before the last repair does.
	require.NoError(t, tb.redis.Client.Del(ctx, tb.e.rs.Keys().Alive("release")).Err())
	out, err = later.ReconcileAtStart(ctx, started)
	require.NoError(t, err)
	require.True(t, out.Ran)
}

// An instance that took the start-up repair and died holding its lease delays the others only
// until the lease runs out; then one of them repairs.
func TestReconcileAtStartTakesOverFromADeadInstance(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	tb.resource(t, 1, 60, "08:00", "22:00")
	dead, err := New(tb.opts)
	require.NoError(t, err)
	held, err := dead.Lease("startup_reconcile").Hold(ctx, 500*time.Millisecond)
	require.NoError(t, err)
	require.True(t, held)

	next, err := New(tb.opts)
	require.NoError(t, err)
	done := make(chan StartupOutcome, 1)
	go func() {
		out, err := next.ReconcileAtStart(ctx, tb.clock.Now())
		if err != nil {
			t.Error(err)
		}
		done <- out
	}()
	select {
	case <-done:
		t.Fatal("the repair did not wait for the lease of the instance that had it")
	case <-time.After(200 * time.Millisecond):
	}
	if tb.redis.Mini != nil {
		tb.redis.Mini.FastForward(time.Second) // the in-process Redis expires keys only when told
	}
	select {
	case out := <-done:
		require.True(t, out.Ran)
	case <-time.After(10 * time.Second):
		t.Fatal("the repair was not taken over after the dead instance's lease ran out")
	}
}
