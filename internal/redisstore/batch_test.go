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

// pipelines counts the pipelines a client sends, those with scripts (EVALSHA), and the venue
// timer marks (SADD) in them.
type pipelines struct{ n, scripted, marks atomic.Int64 }

func (p *pipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		p.n.Add(1)
		scripted := false
		for _, c := range cmds {
			switch c.Name() {
			case "sadd":
				p.marks.Add(1)
			case "evalsha":
				scripted = true
			}
		}
		if scripted {
			p.scripted.Add(1)
		}
		return next(ctx, cmds)
	}
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
	ver, err := s.CatalogVersion(ctx, 1)
	require.NoError(t, err)
	hold := func(i int) (redisstore.HoldOutcome, error) {
		rec := &redisstore.HoldRecord{CatalogVersion: ver, ID: redisstore.NewHoldID(1), UserID: fmt.Sprintf("u%d", i), VenueID: 1, ResourceID: 1, Quantity: 1,
			Start: now, End: now.Add(time.Hour), OccupyStart: now, OccupyEnd: now.Add(time.Hour), Deadline: now.Add(time.Hour),
			Created: now, Fields: []string{field}, Days: []string{"1:d"}}
		out, _, err := s.Hold(ctx, rec, now, 0)
		return out, err
	}
	_, err = hold(-1) // the script loaded, a connection open; it takes one of the ten units
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
	// Every hold's deadline falls in the same second: one mark of the venue a pipeline, and it is there.
	require.Equal(t, p.scripted.Load(), p.marks.Load(), "one venue timer mark a pipeline of holds")
	due, err := s.DueBetween(ctx, now.Add(time.Hour).Unix(), now.Add(time.Hour).Unix()+1)
	require.NoError(t, err)
	require.Equal(t, []uint64{1}, due, "the venue is marked at the holds' deadline")
	t.Logf("%d holds in %d pipelines", n, p.n.Load())
}
