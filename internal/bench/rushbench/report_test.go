package rushbench

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/models"
)

// tiny is a rush of 2 resources × 1 slot × capacity 2: 4 units over 2 slots.
func tiny() Config {
	c := DefaultConfig()
	c.Clients, c.Resources, c.Slots, c.Capacity, c.SecondWave = 10, 2, 1, 2, 4
	return c
}

func sale(slot int, at time.Duration) answer { return answer{slot: slot, at: at, status: 201} }
func full(slot int, at time.Duration) answer {
	return answer{slot: slot, at: at, status: 409, code: "slot_full"}
}

func TestSoldOutAndOversold(t *testing.T) {
	t.Parallel()
	rush := []answer{sale(0, 10*time.Millisecond), sale(1, 20*time.Millisecond), full(0, 25*time.Millisecond),
		sale(0, 30*time.Millisecond), sale(1, 50*time.Millisecond), sale(1, 60*time.Millisecond)}
	at, ok := soldOut(rush, 2, 2)
	require.True(t, ok)
	require.Equal(t, 50*time.Millisecond, at, "the second unit of slot 1, the last slot to fill, sold the last unit")
	_, ok = soldOut(rush[:4], 2, 2)
	require.False(t, ok, "slot 1 has one unit left")

	sold := make([]int, 2)
	require.Equal(t, 1, countSales(rush, sold, 2), "the third sale of slot 1 is one too many")
	// A sale in the second wave of a slot the rush sold out is oversold too.
	require.Equal(t, 1, countSales([]answer{full(0, time.Millisecond), sale(0, 2*time.Millisecond)}, sold, 2))
	require.Equal(t, []int{3, 3}, sold)
}

func TestPoolAndGoals(t *testing.T) {
	t.Parallel()
	cfg := tiny()
	mk := func(d Design, scale time.Duration, cpu cpuUse) *measurement {
		// 10 clients: 4 sales (the last unit at 4 × scale), 5 refusals, a 503 and no answer at all.
		rush := []answer{sale(0, scale), sale(1, 2*scale), sale(0, 3*scale), sale(1, 4*scale)}
		for i := range 5 {
			rush = append(rush, full(i%2, time.Duration(5+i)*scale))
		}
		rush = append(rush, answer{slot: 0, at: 10 * scale, status: 503, code: "backend_unavailable"},
			answer{slot: 1, at: 11 * scale, code: "connection reset by peer"})
		after := []answer{full(0, scale), full(1, scale), full(0, 2*scale), full(1, 2*scale)}
		m := &measurement{design: d, waves: map[Wave]*waveResult{
			WaveRush:  {wave: WaveRush, clients: 10, answers: rush, cpu: cpu},
			WaveAfter: {wave: WaveAfter, clients: 4, answers: after, cpu: cpuUse{server: 4 * time.Millisecond, redis: -1, mariadb: -1, client: 0}},
		}}
		sold := make([]int, 2)
		m.waves[WaveRush].oversold = countSales(rush, sold, cfg.Capacity)
		m.waves[WaveAfter].oversold = countSales(after, sold, cfg.Capacity)
		return m
	}
	// slotwheel: 10 ms a step; per answer (10 a run) 1 ms of its process, 0.5 ms of Redis, 0.1 ms of
	// MariaDB. The plain SQL design: 30 ms a step, 2 ms of its process, MariaDB not read.
	sw := mk(DesignSlotwheel, 10*time.Millisecond, cpuUse{server: 10 * time.Millisecond, redis: 5 * time.Millisecond,
		mariadb: time.Millisecond, client: 0})
	sql := mk(DesignSQL, 30*time.Millisecond, cpuUse{server: 20 * time.Millisecond, redis: 0, mariadb: -1, client: 0})

	r := pool(cfg, DesignSlotwheel, WaveRush, []*measurement{sw, sw}, nil)
	require.Equal(t, 2, r.Runs)
	require.Equal(t, 8, r.Sales)
	require.Equal(t, 10, r.Refusals)
	require.Equal(t, 4, r.Errors)
	require.Equal(t, map[string]int{"503 backend_unavailable": 2, "no answer: connection reset by peer": 2}, r.ErrorKinds)
	require.Equal(t, 20, r.Answers, "a failure to get an answer is an error but not an answer")
	require.Equal(t, 40.0, *r.SoldOutMs)
	require.Equal(t, 100.0, r.LastAnswerMs)
	require.InDelta(t, 100, r.AnswersPerSecond, 1e-9, "10 answers in the 100 ms to the last one")
	require.Equal(t, 50.0, r.P50Ms)
	require.Equal(t, 100.0, r.MaxMs)
	require.InDelta(t, 1000, *r.CPU.Server, 1e-9, "2 × 10 ms over 20 answers")
	require.InDelta(t, 500, *r.CPU.Redis, 1e-9)
	require.InDelta(t, 1600, r.CPU.Design, 1e-9, "process, Redis and MariaDB")
	require.False(t, r.CPU.Partial)
	require.Len(t, r.PerRun, 2)

	q := pool(cfg, DesignSQL, WaveRush, []*measurement{sql}, []string{"run 2: it broke"})
	require.Nil(t, q.CPU.MariaDB)
	require.True(t, q.CPU.Partial, "MariaDB was not read")
	require.InDelta(t, 2000, q.CPU.Design, 1e-9, "its process only: Redis is no part of the SQL design")
	require.Contains(t, q.Note, "1 of 1 runs failed")

	after := pool(cfg, DesignSlotwheel, WaveAfter, []*measurement{sw}, nil)
	require.Nil(t, after.SoldOutMs, "the second wave sells nothing")
	require.Equal(t, 4, after.Refusals)
	require.Zero(t, after.Oversold)

	rep := &Report{Rows: []Row{r, after, q}, Checks: []Check{{Design: DesignSlotwheel}, {Design: DesignSQL}}}
	gs := goals(rep, cfg)
	require.Len(t, gs, 4)
	require.True(t, gs[0].Met, "40 ms ≤ ½ × 120 ms: %s", gs[0].Got)
	require.Contains(t, gs[0].Got, "0.33×")
	require.True(t, gs[1].Met, "100/s ≥ 2 × 33.3/s: %s", gs[1].Got)
	require.True(t, gs[2].Met, gs[2].Got)
	require.False(t, gs[3].Met, "1,500 µs is over 100: %s", gs[3].Got)
	require.Equal(t, "1500 µs (process 1000 + Redis 500)", gs[3].Got)
	require.Contains(t, gs[3].Note, "smaller size")

	// One oversold unit, in the clients' eyes or in a design's own account, misses the goal.
	rep.Rows[2].Oversold = 1
	require.False(t, goals(rep, cfg)[2].Met)
	rep.Rows[2].Oversold = 0
	rep.Checks[0].OversoldUnits = 1
	require.False(t, goals(rep, cfg)[2].Met)
	// Without the SQL design nothing is compared.
	gs = goals(&Report{Rows: []Row{r}}, cfg)
	require.False(t, gs[0].Met)
	require.Contains(t, gs[0].Got, "not measured")
}

func TestStatCPU(t *testing.T) {
	t.Parallel()
	stat := "4242 (a (weird) name) S 1 1 1 0 -1 4194304 99 0 0 0 250 130 0 0 20 0 1 0 903017 3133440 389"
	require.Equal(t, 3800*time.Millisecond, statCPU(stat), "380 ticks of 10 ms")
	require.Equal(t, time.Duration(-1), statCPU("garbage"))
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		require.GreaterOrEqual(t, procCPU("self"), time.Duration(0))
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	require.NoError(t, cfg.Validate())
	require.Equal(t, 400, cfg.units())
	a, b := cfg.choices(), cfg.choices()
	require.Equal(t, a, b, "the same seed, the same rush")
	require.Len(t, a[WaveRush], 20_000)
	require.Len(t, a[WaveAfter], 5_000)
	for _, k := range a[WaveRush] {
		require.True(t, k >= 0 && k < 200)
	}
	cfg.Seed++
	require.NotEqual(t, a[WaveRush], cfg.choices()[WaveRush])

	bad := cfg
	bad.Clients, bad.Slots, bad.Timeout, bad.Designs = 0, maxSlots+1, 0, []Design{"kafka"}
	err := bad.Validate()
	for _, s := range []string{"--clients", "--slots", "--timeout", "kafka"} {
		require.ErrorContains(t, err, s)
	}

	g, err := newGrid(10, time.Date(2026, 3, 1, 23, 30, 0, 0, time.UTC)) // 07:30 on 2 March in Shanghai
	require.NoError(t, err)
	require.Equal(t, "2026-03-03", g.date())
	require.Equal(t, 60, g.minutes)
	require.Equal(t, "08:00", g.opens())
	require.Equal(t, "18:00", g.closes())
	g, _ = newGrid(maxSlots, time.Now())
	require.Equal(t, 15, g.minutes)
	require.Equal(t, "24:00", g.closes())
}

func TestReportWrites(t *testing.T) {
	t.Parallel()
	cfg := tiny()
	m := &measurement{waves: map[Wave]*waveResult{
		WaveRush:  {answers: []answer{sale(0, time.Millisecond), sale(0, 2*time.Millisecond), sale(1, 3*time.Millisecond), sale(1, 4*time.Millisecond), full(0, 5*time.Millisecond)}},
		WaveAfter: {answers: []answer{full(0, time.Millisecond)}},
	}}
	rep := &Report{Started: time.Now(), Backends: "test", Config: cfg.forReport(models.Pool{})}
	for _, d := range Designs {
		for _, w := range cfg.waves() {
			rep.Rows = append(rep.Rows, pool(cfg, d, w, []*measurement{m}, nil))
		}
	}
	rep.Rows = append(rep.Rows, pool(cfg, DesignSQL, WaveRush, nil, []string{"plain SQL, run 2: setup failed"}))
	rep.Goals = goals(rep, cfg)
	var out bytes.Buffer
	require.NoError(t, rep.WriteTable(&out))
	require.Regexp(t, `(?m)^slotwheel\s+rush\s+10\s+4ms\s+1000\s+`, out.String())
	require.Regexp(t, `(?m)^plain SQL\s+after sell-out\s+4\s+—\s+`, out.String())
	require.Regexp(t, `(?m)^plain SQL\s+rush\s+failed \(see the note\)$`, out.String())
	require.Contains(t, out.String(), "setup failed")
	require.Regexp(t, `(?m)^  MISSED  oversold: `, out.String(), "no design checked its own account")

	dir := t.TempDir()
	files, err := rep.Write(dir)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "bench-rush.json"), filepath.Join(dir, "bench-rush.png")}, files)
	var back Report
	require.NoError(t, json.Unmarshal(must(os.ReadFile(files[0])), &back))
	require.Len(t, back.Rows, 5)
	require.Equal(t, 4.0, *back.Rows[0].SoldOutMs)
	img, err := png.DecodeConfig(bytes.NewReader(must(os.ReadFile(files[1]))))
	require.NoError(t, err)
	require.Greater(t, img.Width, 500)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
