package loop

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A loop whose next work falls due before its interval runs when asked to, and a later KickAfter
// takes the place of an earlier one.
func TestKickAfterRunsBeforeTheInterval(t *testing.T) {
	t.Parallel()
	ran := make(chan struct{}, 10)
	l := New(Config{Name: "test_kick_after", Interval: time.Hour}, func(context.Context) error {
		ran <- struct{}{}
		return nil
	})
	l.Start(context.Background())
	defer l.Stop()
	l.KickAfter(time.Hour)
	l.KickAfter(10 * time.Millisecond)
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("no run 10 s after KickAfter(10ms), with an hourly interval")
	}
}

// countingLease is a Lease whose holder is whoever it says, counting the round trips asked of it.
type countingLease struct {
	holds atomic.Int32
	held  atomic.Bool
}

func (c *countingLease) Hold(context.Context, time.Duration) (bool, error) {
	c.holds.Add(1)
	return c.held.Load(), nil
}

func (c *countingLease) Release(context.Context) error { return nil }

// A loop that runs several times within its lease's TTL renews the lease once a third of the TTL,
// not at every run; one that does not hold it asks at every run, so that it takes over as soon as
// the lease is free.
func TestLeaseRenewedOnceAThirdOfItsTTL(t *testing.T) {
	ctx := context.Background()
	lease := &countingLease{}
	lease.held.Store(true)
	var ran atomic.Int32
	l := New(Config{Name: "lease_test", Interval: time.Hour, LeaseTTL: 3 * time.Second, Lease: lease},
		func(context.Context) error { ran.Add(1); return nil })
	for range 10 {
		require.NoError(t, l.RunOnce(ctx))
	}
	require.Equal(t, int32(10), ran.Load(), "every run ran")
	require.Equal(t, int32(1), lease.holds.Load(), "ten runs within a second renewed the lease once")

	other := &countingLease{}
	idle := New(Config{Name: "lease_test_other", Interval: time.Hour, LeaseTTL: 3 * time.Second, Lease: other},
		func(context.Context) error { t.Error("ran without the lease"); return nil })
	for range 3 {
		require.NoError(t, idle.RunOnce(ctx))
	}
	require.Equal(t, int32(3), other.holds.Load(), "an instance without the lease asks at every run")
}
