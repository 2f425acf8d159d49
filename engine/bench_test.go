package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The hold benchmarks run the engine's whole path (validation, grid, script) and, in the same run,
// the bare hold script with precomputed arguments: the ratio of the two is the engine's overhead.
// Capacity is set high enough that no hold is refused, and the hold TTL long enough that none expires.

func benchSetup(b *testing.B, resources int) (*testBundle, []Resource) {
	tb := setup(b, func(o *Options) { o.HoldTTL = time.Hour })
	ctx := context.Background()
	v, err := tb.e.CreateVenue(ctx, System, VenueInput{Name: "Bench", Timezone: "Asia/Shanghai"})
	require.NoError(b, err)
	var res []Resource
	for i := 0; i < resources; i++ {
		r, err := tb.e.CreateResource(ctx, System, ResourceInput{VenueID: v.ID, Name: "R", Kind: "desk", Capacity: 1000000})
		require.NoError(b, err)
		_, err = tb.e.SetSchedule(ctx, System, r.ID, ScheduleInput{SlotMinutes: 60, HorizonDays: 2,
			Weekly: []WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: "08:00", Close: "22:00"}}})
		require.NoError(b, err)
		// Warm the day so both paths measure steady state.
		_, err = tb.e.Availability(ctx, AvailabilityQuery{ResourceID: r.ID, Date: "2026-12-07"})
		require.NoError(b, err)
		res = append(res, r)
	}
	return tb, res
}

func benchEngine(b *testing.B, tb *testBundle, res []Resource) {
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			r := res[int(i)%len(res)]
			_, err := tb.e.Hold(ctx, HoldRequest{UserID: "u", ResourceID: r.ID, Start: at("15:00"), End: at("16:00")})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "holds/s")
}

func benchBare(b *testing.B, tb *testBundle, res []Resource) {
	ctx := context.Background()
	k := tb.e.keys
	script := HoldScriptForBenchmark()
	var n atomic.Int64
	now := tb.clock.Now()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			r := res[int(i)%len(res)]
			v := r.VenueID
			id := fmt.Sprintf("h%d_bench%015d", v, i)
			err := script.Run(ctx, tb.redis.Client,
				[]string{k.Capacity(v), k.Used(v), k.Owners(v), k.Wheel(v), k.Days(v), k.Hold(v, id), k.UserHolds(v, "u")},
				now.UnixMilli(), now.Add(time.Hour).UnixMilli(), 1, id, keep.Milliseconds(), k.HoldPrefix(v),
				DayField(r.ID, "2026-12-07"), SlotField(r.ID, at("15:00").Unix()/60),
				"id", id, "user", "u", "venue", v, "resource", r.ID, "service", 0, "qty", 1,
				"start_ms", 0, "end_ms", 0, "ostart_ms", 0, "oend_ms", 0, "deadline_ms", now.Add(time.Hour).UnixMilli(),
				"created_ms", now.UnixMilli(), "amount", 0, "days", "").Err()
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "holds/s")
}

// BenchmarkHold compares the engine's hold path against the bare script, on one hot slot and spread
// over 1,000 resources. Compare the holds/s of engine and bare within one case.
func BenchmarkHold(b *testing.B) {
	for _, c := range []struct {
		name      string
		resources int
	}{{"hot_slot", 1}, {"1000_resources", 1000}} {
		b.Run(c.name+"/bare_script", func(b *testing.B) {
			tb, res := benchSetup(b, c.resources)
			benchBare(b, tb, res)
		})
		b.Run(c.name+"/engine", func(b *testing.B) {
			tb, res := benchSetup(b, c.resources)
			benchEngine(b, tb, res)
		})
	}
}
