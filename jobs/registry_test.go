package jobs

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// After Redis loses its data the queues are re-registered, so the dashboard lists them again: Asynq
// registers a queue only at a process's first enqueue.
func TestQueuesAreRegisteredAgainAfterRedisLoss(t *testing.T) {
	t.Parallel()
	b := setup(t, testConfig{})
	ctx := context.Background()
	listed := func() bool {
		qs, err := b.inspector.Queues()
		require.NoError(t, err)
		return slices.Contains(qs, b.jobs.ReleaseQueue()) && slices.Contains(qs, b.jobs.MaintQueue())
	}
	require.NoError(t, b.jobs.runLoop(ctx, "queue_registry"))
	require.True(t, listed())
	// What FLUSHALL does to the list of queues (only this test's, on a shared Redis).
	require.NoError(t, b.redis.Client.SRem(ctx, "asynq:queues", b.jobs.ReleaseQueue(), b.jobs.MaintQueue()).Err())
	require.False(t, listed())
	require.NoError(t, b.jobs.runLoop(ctx, "queue_registry"))
	require.True(t, listed(), "the dashboard finds the queues again")
}
