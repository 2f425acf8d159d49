package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/redisstore"
)

// BenchmarkLedger measures what the capacity ledger costs a hold and its confirm: the same work with
// and without it, on the same backends in the same run (compare confirms/s within a case). A hot
// slot puts every confirm on one ledger row, whose lock each holds until it commits; spread puts
// them on a thousand resources.
func BenchmarkLedger(b *testing.B) {
	for _, c := range []struct {
		name      string
		resources int
	}{{"hot_slot", 1}, {"spread", 1000}} {
		for _, ledger := range []bool{true, false} {
			name := c.name + "/ledger"
			if !ledger {
				name = c.name + "/no_ledger"
			}
			b.Run(name, func(b *testing.B) {
				tb := setup(b, func(o *Options) { o.MaxActiveHolds, o.HoldTTL = 0, time.Hour })
				if !ledger {
					tb.e.ss.MeasureWithoutLedger()
				}
				res := make([]Resource, c.resources)
				res[0] = tb.resource(b, 1_000_000, 60, "00:00", "24:00")
				for i := 1; i < len(res); i++ {
					res[i] = tb.resourceAt(b, res[0].VenueID, 1_000_000, 60, "00:00", "24:00")
				}
				start := at("15:00")
				for _, r := range res {
					tb.slotOf(b, r.ID, start) // every day in Redis before the clock starts
				}
				var n atomic.Uint64
				ctx := context.Background()
				b.SetParallelism(16) // 32 goroutines on two cores
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := n.Add(1)
						user := booking.Actor{UserID: "u" + strconv.FormatUint(i, 10), Role: booking.RoleUser}
						h, err := tb.e.Hold(ctx, HoldRequest{UserID: user.UserID, ResourceID: res[i%uint64(len(res))].ID, Start: start, End: start.Add(time.Hour)})
						if err == nil {
							_, err = tb.e.Confirm(ctx, user, h.ID)
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "confirms/s")
			})
		}
	}
}

// BenchmarkLedgerRace is the hot slot after a failover: Redis, behind, has let 1,000 holds through
// on a slot of 10 units, and their confirms race. Each run books exactly 10 (it fails otherwise);
// the answers' latencies, from the start of the race, are reported over all runs.
func BenchmarkLedgerRace(b *testing.B) {
	const racers, capacity = 1000, 10
	tb := setup(b, func(o *Options) { o.MaxActiveHolds, o.HoldTTL = 0, time.Hour })
	ctx := context.Background()
	res := tb.resource(b, capacity, 60, "00:00", "24:00")
	var lat []time.Duration
	var mu sync.Mutex
	for i := range b.N {
		b.StopTimer()
		start := at("11:00").Add(time.Duration(i%12)*time.Hour).AddDate(0, 0, i/12%6) // a slot of its own per run
		tb.slotOf(b, res.ID, start)
		field := redisstore.SlotField(res.ID, start.Unix()/60)
		require.NoError(b, tb.redis.Client.HSet(ctx, tb.e.rs.Keys().Venue(res.VenueID).Capacity(), field, racers).Err())
		holds := make([]booking.Hold, racers)
		for j := range holds {
			holds[j] = tb.hour(b, booking.Actor{UserID: fmt.Sprintf("r%d-%d", i, j), Role: booking.RoleUser}, res, start)
		}
		var booked atomic.Int64
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for j, h := range holds {
			wg.Go(func() {
				<-gate
				began := time.Now()
				_, err := tb.e.Confirm(ctx, booking.Actor{UserID: fmt.Sprintf("r%d-%d", i, j), Role: booking.RoleUser}, h.ID)
				took := time.Since(began)
				switch {
				case err == nil:
					booked.Add(1)
				case !errors.Is(err, booking.ErrSlotFull):
					b.Error(err)
				}
				mu.Lock()
				lat = append(lat, took)
				mu.Unlock()
			})
		}
		b.StartTimer()
		close(gate)
		wg.Wait()
		b.StopTimer()
		require.EqualValues(b, capacity, booked.Load(), "exactly the capacity is sold")
		tb.e.WaitRebuilds()
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50_ms")
	b.ReportMetric(q(0.99), "p99_ms")
	b.ReportMetric(q(1), "max_ms")
}
