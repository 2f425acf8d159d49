package engine_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/bench"
	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/internal/testenv/redistest"
)

// spreadVenues is how many venues the holds of BenchmarkHoldMasters spread over: each venue's keys
// share one hash tag, so on a cluster they land on the three masters about evenly.
const spreadVenues = 48

// BenchmarkHoldMasters runs the engine's hold path, spread over 48 venues, against one private
// redis-server (one master) and against a private Redis Cluster of three masters and three replicas,
// in the same run; compare holds/s of 3_masters with 1_master. Throughput alone cannot show a
// cluster's scaling on a small machine, where the client and every Redis process share the cores, so
// it also reports where one hold's CPU goes: the masters' (master_cpu_us/hold, INFO cpu; a master
// runs scripts on one thread, so a shard's ceiling is about 1e6 / master_cpu_us/hold holds/s), the
// replicas', and this process's (the engine's hold path and the Redis client). script_us/hold is the
// masters' own timing of the scripts (INFO commandstats), which counts time they were descheduled.
//
//	go test -run '^$' -bench HoldMasters -benchtime 5s ./engine/
func BenchmarkHoldMasters(b *testing.B) {
	db := testenv.NewDB(b)
	single := redistest.StartServer(b)
	cluster := redistest.StartCluster(b)
	targets := []struct {
		name              string
		client            redis.UniversalClient
		masters, replicas func() []string
	}{
		{"1_master", singleClient(b, single.Addr()), func() []string { return []string{single.Addr()} }, func() []string { return nil }},
		{"3_masters", cluster.Client(), cluster.Masters, cluster.Replicas},
	}
	rates := map[string]float64{}
	for _, tg := range targets {
		prefix := testenv.Unique("swb")
		e, err := engine.New(engine.Options{DB: db.Gorm, Redis: tg.client, Prefix: prefix, HoldTTL: time.Hour})
		require.NoError(b, err)
		hold := spreadFixture(b, e)
		b.Run(tg.name, func(b *testing.B) {
			masters, replicas := tg.masters(), tg.replicas()
			script0, master0, replica0, client0 := scriptTime(b, masters), cpuTime(b, masters), cpuTime(b, replicas), clientCPU(b)
			calls0 := callsByCommand(b, masters)
			var n atomic.Uint64
			b.SetParallelism(16) // 32 goroutines on two cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := hold(context.Background(), n.Add(1)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			per := func(d float64) float64 { return d / float64(b.N) }
			rate := float64(b.N) / b.Elapsed().Seconds()
			rates[tg.name] = rate
			b.ReportMetric(rate, "holds/s")
			b.ReportMetric(per(scriptTime(b, masters)-script0), "script_us/hold")
			b.ReportMetric(per(cpuTime(b, masters)-master0), "master_cpu_us/hold")
			b.ReportMetric(per(cpuTime(b, replicas)-replica0), "replica_cpu_us/hold")
			b.ReportMetric(per(clientCPU(b)-client0), "client_cpu_us/hold")
			calls := callsByCommand(b, masters)
			total := 0.0
			for cmd, n := range calls {
				total += float64(n - calls0[cmd])
			}
			b.ReportMetric(per(total), "commands/hold")
		})
	}
	if one, three := rates["1_master"], rates["3_masters"]; one > 0 && three > 0 {
		b.Logf("3 masters / 1 master: %.2f (%.0f / %.0f holds/s)", three/one, three, one)
	}
}

// spreadFixture creates spreadVenues venues with one resource each, open all day in hourly slots
// with room for every hold of a run, loads tomorrow into Redis, and returns a hold of the 15:00 slot
// of venue i mod spreadVenues.
func spreadFixture(b *testing.B, e *engine.Engine) func(context.Context, uint64) error {
	ctx := context.Background()
	var resources []engine.Resource
	var start time.Time
	for i := range spreadVenues {
		v, err := e.CreateVenue(ctx, booking.System, engine.VenueInput{Name: "bench " + strconv.Itoa(i), Timezone: "Asia/Shanghai"})
		require.NoError(b, err)
		r, err := e.CreateResource(ctx, booking.System, engine.ResourceInput{VenueID: v.ID, Name: "desk", Kind: "desk",
			Capacity: bench.Capacity})
		require.NoError(b, err)
		_, err = e.SetSchedule(ctx, booking.System, r.ID, booking.ScheduleInput{SlotMinutes: 60, HorizonDays: 3,
			Weekly: []booking.WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: "00:00", Close: "24:00"}}})
		require.NoError(b, err)
		loc, _ := time.LoadLocation(v.Timezone)
		tomorrow := e.Clock().Now().In(loc).AddDate(0, 0, 1)
		start = time.Date(tomorrow.Year(), tomorrow.Month(), tomorrow.Day(), 15, 0, 0, 0, loc)
		_, err = e.Availability(ctx, engine.AvailabilityQuery{ResourceID: r.ID, Date: tomorrow.Format("2006-01-02")})
		require.NoError(b, err)
		resources = append(resources, r)
	}
	return func(ctx context.Context, i uint64) error {
		r := resources[i%uint64(len(resources))]
		// A user of its own per hold, as in life: one user's sets of holds do not grow with the run.
		_, err := e.Hold(ctx, engine.HoldRequest{UserID: "u" + strconv.FormatUint(i, 10), ResourceID: r.ID, Start: start, End: start.Add(time.Hour)})
		return err
	}
}

// callsByCommand sums the calls of each command over the masters (INFO commandstats), INFO
// itself left out.
func callsByCommand(b *testing.B, masters []string) map[string]int64 {
	byAddr, err := redistest.CommandCalls(context.Background(), masters)
	require.NoError(b, err)
	out := map[string]int64{}
	for _, calls := range byAddr {
		for cmd, n := range calls {
			out[cmd] += n
		}
	}
	return out
}

// cpuTime sums the CPU seconds (user and system) the servers at addrs have used, in microseconds,
// from INFO cpu.
func cpuTime(b *testing.B, addrs []string) float64 {
	total := 0.0
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		info, err := c.Info(context.Background(), "cpu").Result()
		_ = c.Close()
		require.NoError(b, err)
		for line := range strings.Lines(info) {
			name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok && (name == "used_cpu_user" || name == "used_cpu_sys") {
				s, err := strconv.ParseFloat(v, 64)
				require.NoError(b, err)
				total += s * 1e6
			}
		}
	}
	return total
}

// clientCPU is the CPU this process has used, in microseconds.
func clientCPU(b *testing.B) float64 {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}

// scriptTime sums the microseconds the masters spent running scripts (EVALSHA and EVAL), from INFO
// commandstats.
func scriptTime(b *testing.B, masters []string) float64 {
	total := 0.0
	for _, addr := range masters {
		c := redis.NewClient(&redis.Options{Addr: addr})
		info, err := c.Info(context.Background(), "commandstats").Result()
		_ = c.Close()
		require.NoError(b, err)
		for line := range strings.Lines(info) {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
				continue
			}
			for _, kv := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(kv, "usec="); ok {
					us, err := strconv.ParseFloat(v, 64)
					require.NoError(b, err)
					total += us
				}
			}
		}
	}
	return total
}

func singleClient(b *testing.B, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 128})
	b.Cleanup(func() { _ = c.Close() })
	return c
}
