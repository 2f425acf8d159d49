package releasebench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"image/png"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/internal/backend"
	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/jobs"
)

func TestComputePollBurst(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	ats := make([]time.Time, 1000)
	for i := range ats {
		ats[i] = at
	}
	c := cost{fixed: 2 * time.Millisecond, perRow: 10 * time.Microsecond} // 12 ms for the 1,000 rows
	m := computePoll(ats, time.Minute, c)
	m.finish()
	require.Equal(t, 1000, m.n)
	require.Equal(t, 0, m.early, "a poll never releases early")
	// One tick takes all of them: the lag is the wait for it (uniform over the period) plus 12 ms.
	require.InDelta(t, float64(30*time.Second+12*time.Millisecond), float64(quantile(m.lags, 0.5)), float64(50*time.Millisecond))
	require.InDelta(t, float64(time.Minute+12*time.Millisecond), float64(m.maxLag), float64(50*time.Millisecond))
	require.Greater(t, quantile(m.lags, 0), 12*time.Millisecond-time.Millisecond)
	require.InDelta(t, float64(time.Minute+12*time.Millisecond), float64(m.last), float64(50*time.Millisecond), "the worst phase waits a whole period")
}

func TestComputePollSpread(t *testing.T) {
	t.Parallel()
	// Due one per second over ten periods: a booking waits for the next tick, uniform over a period
	// whatever the phase, so the pooled lags are uniform over (0, period].
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	ats := make([]time.Time, 100)
	for i := range ats {
		ats[i] = at.Add(time.Duration(i) * time.Second)
	}
	m := computePoll(ats, 10*time.Second, cost{})
	m.finish()
	require.InDelta(t, float64(5*time.Second), float64(quantile(m.lags, 0.5)), float64(100*time.Millisecond))
	require.InDelta(t, float64(9900*time.Millisecond), float64(quantile(m.lags, 0.99)), float64(150*time.Millisecond))
	require.LessOrEqual(t, m.maxLag, 10*time.Second)
}

func TestFitCost(t *testing.T) {
	t.Parallel()
	c := fitCost([]tick{{took: 3 * time.Millisecond}, {took: 2 * time.Millisecond}, {took: 4 * time.Millisecond},
		{took: 3*time.Millisecond + 1000*5*time.Microsecond, rows: 1000}, {took: 3*time.Millisecond + 500*5*time.Microsecond, rows: 500}})
	require.Equal(t, 3*time.Millisecond, c.fixed, "the median of the idle ticks")
	require.Equal(t, 5*time.Microsecond, c.perRow)
	require.Equal(t, 8*time.Millisecond, c.of(1000))
	// With no idle tick, the quickest stands for the fixed part.
	c = fitCost([]tick{{took: 10 * time.Millisecond, rows: 100}, {took: 30 * time.Millisecond, rows: 300}})
	require.Equal(t, 10*time.Millisecond, c.fixed)
	require.Equal(t, 50*time.Microsecond, c.perRow)
}

func TestSpecs(t *testing.T) {
	t.Parallel()
	cfg := Config{Burst: 10, SteadyRate: 1000, SteadySeconds: 2}.withDefaults(&Env{})
	now := time.Date(2026, 1, 1, 10, 0, 0, 123e6, time.UTC)

	b := cfg.spec(CaseBurst)
	first := b.plan(now, 100, 0) // 0.1 s of setup, with room: 10:00:01.073, then the next whole second
	require.Equal(t, time.Date(2026, 1, 1, 10, 0, 2, 0, time.UTC), first)
	for _, at := range b.releaseAts(first) {
		require.Equal(t, first, at)
	}

	s := cfg.spec(CaseSteady)
	require.Equal(t, 2000, s.n)
	ats := s.releaseAts(s.plan(now, 1000, time.Second))
	require.Equal(t, time.Millisecond, ats[1].Sub(ats[0]), "one booking a millisecond")
	require.Equal(t, 1999*time.Millisecond, ats[len(ats)-1].Sub(ats[0]))
	require.True(t, ats[0].After(now.Add(5*time.Second)), "after the 2 s of bookings and the 1 s after, with room")

	busy := Config{BusyRate: 750, BusySeconds: 2}.withDefaults(&Env{}).spec(CaseBusy)
	require.Equal(t, 1500, busy.n)
	ats = busy.releaseAts(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	require.Equal(t, time.Second, ats[750].Sub(ats[0]), "750 a second, 4/3 ms apart to the millisecond")
	for i := 1; i < len(ats); i++ {
		require.False(t, ats[i].Before(ats[i-1]))
	}
	require.Equal(t, DefaultCases, Config{}.withDefaults(&Env{}).Cases, "busy is asked for, not measured by default")
}

func TestPoolAndGoals(t *testing.T) {
	t.Parallel()
	mk := func(lags ...time.Duration) *measurement {
		m := &measurement{design: DesignSlotwheel, label: "slotwheel", c: CaseSteady, n: len(lags), lags: lags,
			last: 5 * time.Millisecond, observed: 20 * time.Millisecond, unitsBack: 30 * time.Millisecond, perSecond: 1000, redisBytes: 600}
		m.finish()
		return m
	}
	r := pool([]*measurement{mk(10*time.Millisecond, 20*time.Millisecond), mk(-time.Millisecond, 300*time.Millisecond)})
	require.Equal(t, 4, r.Bookings)
	require.Equal(t, 4, r.Released)
	require.Equal(t, 1, r.Early)
	require.Equal(t, 300.0, r.MaxMs)
	require.Equal(t, 20.0, *r.SeenMs)
	require.Len(t, r.Percentiles, 101)

	rep := &Report{Rows: []Row{r}}
	gs := goals(rep, Config{Burst: DefaultBurst, SteadyRate: DefaultSteadyRate, SteadySeconds: DefaultSteadySeconds})
	require.Len(t, gs, 2)
	require.False(t, gs[0].Met, "one early release and a 300 ms max miss the steady goal")
	require.True(t, gs[1].Met, "600 bytes a booking is within 700")
}

func TestBusyGoal(t *testing.T) {
	t.Parallel()
	row := func(p99 time.Duration, confirms float64) Row {
		m := &measurement{design: DesignSlotwheel, label: "slotwheel", c: CaseBusy, n: 2, lags: []time.Duration{time.Millisecond, p99},
			observed: 0, unitsBack: 0, redisBytes: -1, contention: &Contention{PoolMaxOpen: 32},
			load: &LoadStats{TargetPerSecond: 750, Seconds: 1, Confirms: int(confirms), lats: []time.Duration{time.Millisecond}}}
		m.load.finish()
		m.finish()
		return pool([]*measurement{m})
	}
	cfg := Config{}.withDefaults(&Env{})
	for _, c := range []struct {
		name     string
		p99      time.Duration
		confirms float64
		met      bool
	}{
		{"on time beside the load", 90 * time.Millisecond, 740, true},
		{"late", 120 * time.Millisecond, 750, false},
		{"on time, but the load fell short", 20 * time.Millisecond, 600, false},
	} {
		gs := goals(&Report{Rows: []Row{row(c.p99, c.confirms)}}, cfg)
		require.Len(t, gs, 1, c.name)
		require.Equal(t, c.met, gs[0].Met, c.name)
		require.Contains(t, gs[0].Got, "confirms/s of 750", c.name)
		require.Empty(t, gs[0].Note, "the issue's size")
	}
}

func TestLoadStats(t *testing.T) {
	t.Parallel()
	a := &LoadStats{TargetPerSecond: 750, Seconds: 2, Confirms: 3, Errors: 1, FirstError: "boom",
		lats: []time.Duration{30 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond}}
	a.finish()
	require.Equal(t, 1.5, a.PerSecond)
	require.Equal(t, 20.0, a.P50Ms)
	require.Equal(t, 30.0, a.MaxMs)
	b := &LoadStats{TargetPerSecond: 750, Seconds: 1, Confirms: 1, lats: []time.Duration{100 * time.Millisecond}}
	b.finish()
	p := poolLoads([]*LoadStats{a, b})
	require.Equal(t, 4, p.Confirms)
	require.Equal(t, 1, p.Errors)
	require.Equal(t, "boom", p.FirstError)
	require.InDelta(t, 4.0/3, p.PerSecond, 1e-9)
	require.Equal(t, 100.0, p.MaxMs)
	require.Nil(t, poolLoads(nil))
}

func TestHistDelta(t *testing.T) {
	t.Parallel()
	buckets := []float64{0, 0.001, 0.01, 0.1, math.Inf(1)}
	a := &metrics.Float64Histogram{Buckets: buckets, Counts: []uint64{5, 5, 5, 5}}
	b := &metrics.Float64Histogram{Buckets: buckets, Counts: []uint64{5 + 98, 5 + 1, 5 + 1, 5}}
	p50, p99, top := histDelta(a, b)
	require.Equal(t, 1.0, p50, "the upper bound of the first bucket, in ms")
	require.Equal(t, 10.0, p99)
	require.Equal(t, 100.0, top)
	p50, _, _ = histDelta(a, a)
	require.Zero(t, p50, "nothing counted")
}

func TestReportWrites(t *testing.T) {
	t.Parallel()
	rep := &Report{Started: time.Now(), Backends: "test", Host: Host{CPUs: 2}, Config: Config{Burst: 3, SteadyRate: 10, SteadySeconds: 1}.withDefaults(&Env{}).forReport()}
	for _, k := range Cases {
		for _, m := range []*measurement{
			{design: DesignSlotwheel, label: "slotwheel", c: k, n: 3, lags: []time.Duration{time.Millisecond, 2 * time.Millisecond, 40 * time.Millisecond}, redisBytes: 500, observed: time.Millisecond, unitsBack: -1},
			{design: DesignAsynq, label: "stock Asynq, defaults", c: k, n: 3, lags: []time.Duration{-200 * time.Millisecond, time.Second, 4 * time.Second}, redisBytes: -1, observed: -1, unitsBack: -1},
		} {
			m.finish()
			rep.Rows = append(rep.Rows, pool([]*measurement{m}))
		}
		c := computePoll([]time.Time{time.Unix(100, 0), time.Unix(100, 0)}, 5*time.Minute, cost{fixed: time.Millisecond})
		c.label, c.c = "poll UPDATE every 5m0s", k
		rep.Rows = append(rep.Rows, pool([]*measurement{c}))
	}
	for i := range rep.Rows {
		if r := &rep.Rows[i]; !r.Computed {
			r.Contention = &Contention{PoolMaxOpen: 32, PoolMaxInUse: 32, PoolWaits: 7, PoolWaitMs: 120, RunnableP99Ms: 4}
			if r.Case == CaseBusy {
				r.Load = &LoadStats{Path: "the engine", TargetPerSecond: 10, Seconds: 1, Confirms: 9, PerSecond: 9, P50Ms: 5, P99Ms: 12, MaxMs: 15}
			}
		}
	}
	rep.Rows = append(rep.Rows, Row{Design: DesignSlotwheel, Label: "slotwheel", Case: CaseSteady, Failed: true, Note: "setup overran"})
	var out bytes.Buffer
	require.NoError(t, rep.WriteTable(&out))
	require.Regexp(t, `(?m)^slotwheel\s+steady\s+failed \(see the note\)`, out.String())
	require.Contains(t, out.String(), "note (slotwheel, steady): setup overran")
	require.Regexp(t, `(?m)^slotwheel\s+burst\s+3\s+2\.0ms\s+40ms\s+40ms\s+0\s`, out.String())
	require.Regexp(t, `(?m)^stock Asynq, defaults\s+steady\s+3\s+1\.00s\s+4\.00s\s+4\.00s\s+1\s`, out.String())
	require.Regexp(t, `(?m)^poll UPDATE every 5m0s \*\s+burst\s+2\s`, out.String())
	require.Contains(t, out.String(), "computed, not waited for")
	require.Regexp(t, `(?m)^slotwheel\s+busy\s+9 \(10\)\s+5\.0ms\s+12ms\s+15ms\s+0\s+32 of 32\s+7\s+120ms\s`, out.String())
	require.Regexp(t, `(?m)^stock Asynq, defaults\s+steady\s+—\s+—\s+—\s+—\s+—\s+32 of 32`, out.String())
	require.Contains(t, out.String(), "through the engine;")

	dir := t.TempDir()
	require.NoError(t, rep.WriteJSON(filepath.Join(dir, "r.json")))
	b, err := os.ReadFile(filepath.Join(dir, "r.json"))
	require.NoError(t, err)
	var back Report
	require.NoError(t, json.Unmarshal(b, &back))
	require.Len(t, back.Rows, 10)
	require.Equal(t, 1, back.Rows[1].Early)
	require.Equal(t, 9.0, back.Rows[6].Load.PerSecond, "the busy case's load")

	require.NoError(t, rep.WriteChart(filepath.Join(dir, "r.png")))
	f, err := os.Open(filepath.Join(dir, "r.png"))
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	require.Greater(t, img.Bounds().Dx(), 500)
}

// Sizes of the Go benchmarks, the by default:
//
//	go test -run XXX -bench ReleaseBurst -timeout 30m ./internal/bench/releasebench/ -burst 1000
var (
	flagBurst         = flag.Int("burst", DefaultBurst, "bookings of BenchmarkReleaseBurst")
	flagSteadyRate    = flag.Int("steady-rate", DefaultSteadyRate, "releases per second of BenchmarkReleaseSteady")
	flagSteadySeconds = flag.Int("steady-seconds", DefaultSteadySeconds, "length of BenchmarkReleaseSteady in seconds")
	flagBusyRate      = flag.Int("busy-rate", DefaultBusyRate, "releases per second of BenchmarkReleaseBusy")
	flagBusySeconds   = flag.Int("busy-seconds", DefaultBusySeconds, "length of BenchmarkReleaseBusy in seconds")
	flagBusyConfirms  = flag.Int("busy-confirm-rate", DefaultBusyConfirms, "confirms per second beside BenchmarkReleaseBusy's releases")
)

// BenchmarkReleaseBurst measures a burst of bookings due at one instant through each design, on
// the test backends (MariaDB and Redis when SLOTWHEEL_TEST_MYSQL_DSN and SLOTWHEEL_TEST_REDIS_URL
// are set, the embedded ones otherwise). One iteration is one burst.
func BenchmarkReleaseBurst(b *testing.B) { benchmarkCase(b, CaseBurst) }

// BenchmarkReleaseSteady measures a steady stream of releases through each design.
func BenchmarkReleaseSteady(b *testing.B) { benchmarkCase(b, CaseSteady) }

// BenchmarkReleaseBusy measures the steady stream's releases while confirms run beside them.
func BenchmarkReleaseBusy(b *testing.B) { benchmarkCase(b, CaseBusy) }

func benchmarkCase(b *testing.B, k Case) {
	env := testEnv(b)
	cfg := Config{Burst: *flagBurst, SteadyRate: *flagSteadyRate, SteadySeconds: *flagSteadySeconds,
		BusyRate: *flagBusyRate, BusySeconds: *flagBusySeconds, BusyConfirmRate: *flagBusyConfirms}
	for _, d := range Designs {
		b.Run(string(d), func(b *testing.B) {
			var rows []Row
			for b.Loop() {
				var err error
				rows, err = Measure(context.Background(), env, cfg, d, k)
				require.NoError(b, err)
			}
			for _, r := range rows {
				suffix := ""
				if r.Computed {
					suffix = "-computed-" + cfg.withDefaults(env).ComputedPeriod.String()
				}
				b.ReportMetric(r.P50Ms, "p50-ms"+suffix)
				b.ReportMetric(r.P99Ms, "p99-ms"+suffix)
				b.ReportMetric(r.MaxMs, "max-ms"+suffix)
				b.ReportMetric(float64(r.Early), "early"+suffix)
				b.ReportMetric(r.LastMs, "last-ms"+suffix)
				if r.SeenMs != nil {
					b.ReportMetric(*r.SeenMs, "seen-ms"+suffix)
				}
				if r.UnitsBackMs != nil {
					b.ReportMetric(*r.UnitsBackMs, "units-back-ms")
				}
				b.ReportMetric(r.PerSecond, "releases/s"+suffix)
				if r.RedisBytes != nil {
					b.ReportMetric(*r.RedisBytes, "redis-B/booking")
				}
				if r.Load != nil {
					b.ReportMetric(r.Load.PerSecond, "confirms/s")
					b.ReportMetric(r.Load.P99Ms, "confirm-p99-ms")
				}
			}
		})
	}
}

// testEnv is the test backends as an Env.
func testEnv(tb testing.TB) *Env {
	tb.Helper()
	rdb, err := backend.OpenRedis(context.Background(), backend.RedisOptions{URL: os.Getenv(testenv.EnvRedis)})
	require.NoError(tb, err)
	tb.Cleanup(rdb.Close)
	return &Env{MySQLDSN: os.Getenv(testenv.EnvMySQL), Dir: tb.TempDir(), Redis: rdb.Client, AsynqOpt: rdb.Asynq,
		Embedded: rdb.Embedded(), Prefix: testenv.Unique("swt"),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		// As the CLI (package main) injects it: only these benchmarks, not the package, use jobs.
		NewReleaseQueue: func(eng *engine.Engine, queue string, concurrency int, log *slog.Logger) (ReleaseQueue, error) {
			jb, err := jobs.New(jobs.Options{Redis: rdb.Asynq, Engine: eng, Queue: queue, Concurrency: concurrency, Lease: eng.Lease, Logger: log})
			if err != nil {
				return nil, err
			}
			return jb, nil
		},
		LoaderInterval: jobs.DefaultLoaderInterval}
}
