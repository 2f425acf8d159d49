package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/testenv"
)

// pipelines counts the pipelines a client sends.
type pipelines struct{ n atomic.Int64 }

func (p *pipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { p.n.Add(1); return next(ctx, cmds) }
}

// Holds asked at the same time go out together, fewer pipelines than holds, and each request gets
// its own script's answer: the last units to the first scripts Redis ran, the others refused.
func TestConcurrentHoldsShareRoundTrips(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	s := redisstore.New(r.Client, r.Prefix)
	ctx := context.Background()
	vk := s.Keys().Venue(1)
	field := redisstore.SlotField(1, 1000)
	require.NoError(t, r.Client.HSet(ctx, vk.Capacity(), field, 10).Err())
	require.NoError(t, r.Client.SAdd(ctx, vk.Days(), "1:d").Err())
	now := time.Now()
	hold := func(i int) (redisstore.HoldOutcome, error) {
		rec := &redisstore.HoldRecord{ID: redisstore.NewHoldID(1), UserID: fmt.Sprintf("u%d", i), VenueID: 1, ResourceID: 1, Quantity: 1,
			Start: now, End: now.Add(time.Hour), OccupyStart: now, OccupyEnd: now.Add(time.Hour), Deadline: now.Add(time.Hour),
			Created: now, Fields: []string{field}, Days: []string{"1:d"}}
		out, _, err := s.Hold(ctx, rec, now, 0)
		return out, err
	}
	_, err := hold(-1) // the script loaded, a connection open; it takes one of the ten units
	require.NoError(t, err)
	p := &pipelines{}
	r.Client.AddHook(p)
	const n = 500
	outs := make([]redisstore.HoldOutcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-gate
			outs[i], errs[i] = hold(i)
		})
	}
	close(gate)
	wg.Wait()
	ok := 0
	for i := range n {
		require.NoError(t, errs[i])
		if outs[i] == redisstore.HoldOK {
			ok++
		} else {
			require.Equal(t, redisstore.HoldFull, outs[i])
		}
	}
	require.Equal(t, 9, ok, "the nine units left, once each")
	require.Less(t, p.n.Load(), int64(n), "holds went out together")
	t.Logf("%d holds in %d pipelines", n, p.n.Load())
}
