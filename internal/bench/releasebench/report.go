package releasebench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is one run: where it ran, how it was sized, a row per design and case, and the issue's
// goals checked against the rows.
type Report struct {
	Started  time.Time    `json:"started"`
	Backends string       `json:"backends"`
	Host     Host         `json:"host"`
	Config   ReportConfig `json:"config"`
	Rows     []Row        `json:"rows"`
	Goals    []Goal       `json:"goals"`
}

// Host is the machine the run measured on.
type Host struct {
	CPUs   int    `json:"cpus"`
	GOOS   string `json:"goos"`
	GOARCH string `json:"goarch"`
	Go     string `json:"go"`
}

// ReportConfig is Config as the report states it.
type ReportConfig struct {
	Burst            int      `json:"burst"`
	SteadyRate       int      `json:"steady_rate"`
	SteadySeconds    int      `json:"steady_seconds"`
	BusyRate         int      `json:"busy_rate"`
	BusySeconds      int      `json:"busy_seconds"`
	BusyConfirmRate  int      `json:"busy_confirms_per_second"`
	Runs             int      `json:"runs"`
	Venues           int      `json:"slotwheel_venues"`
	Designs          []Design `json:"designs"`
	Cases            []Case   `json:"cases"`
	Concurrency      int      `json:"slotwheel_concurrency"`
	SetupWorkers     int      `json:"setup_workers"`
	TimeoutSeconds   float64  `json:"timeout_seconds"`
	PollSeconds      float64  `json:"poll_period_seconds"`
	ComputedSeconds  float64  `json:"computed_poll_period_seconds"`
	AsynqConcurrency int      `json:"asynq_anchor_concurrency"`
}

func (c Config) forReport() ReportConfig {
	return ReportConfig{Burst: c.Burst, SteadyRate: c.SteadyRate, SteadySeconds: c.SteadySeconds, BusyRate: c.BusyRate,
		BusySeconds: c.BusySeconds, BusyConfirmRate: c.BusyConfirmRate, Runs: c.Runs, Venues: c.Venues,
		Designs: c.Designs, Cases: c.Cases, Concurrency: c.Concurrency, SetupWorkers: c.SetupWorkers,
		TimeoutSeconds: c.Timeout.Seconds(), PollSeconds: c.PollPeriod.Seconds(), ComputedSeconds: c.ComputedPeriod.Seconds(),
		AsynqConcurrency: asynqDefaultConcurrency()}
}

// Row is one design on one case, its measurements pooled over the runs: lags are pooled, the
// "seen" times are the worst run's, releases per second the slowest run's, bytes the mean.
type Row struct {
	Design   Design `json:"design"`
	Label    string `json:"label"`
	Case     Case   `json:"case"`
	Computed bool   `json:"computed"`
	// Failed marks a measurement that could not be made; Note says why.
	Failed   bool    `json:"failed,omitempty"`
	Runs     int     `json:"runs"`
	Bookings int     `json:"bookings"`
	Released int     `json:"released"`
	Early    int     `json:"early"`
	P50Ms    float64 `json:"p50_ms"`
	P90Ms    float64 `json:"p90_ms"`
	P99Ms    float64 `json:"p99_ms"`
	P999Ms   float64 `json:"p99_9_ms"`
	MaxMs    float64 `json:"max_ms"`
	MinMs    float64 `json:"min_ms"`
	// LastMs is the latest released_at minus the latest release_at, as written in SQL.
	LastMs float64 `json:"last_released_after_release_at_ms"`
	// SeenMs is when every booking was seen RELEASED by polling SQL (commits visible), and
	// UnitsBackMs when every unit was seen free in Redis, after the latest release_at.
	SeenMs      *float64 `json:"all_released_seen_after_release_at_ms,omitempty"`
	UnitsBackMs *float64 `json:"units_back_seen_after_release_at_ms,omitempty"`
	// PerSecond is bookings per second from the first release_at until all were seen released.
	PerSecond float64 `json:"releases_per_second"`
	// RedisBytes is INFO used_memory's growth per booking while the bookings were made.
	RedisBytes     *float64 `json:"redis_bytes_per_booking,omitempty"`
	SetupPerSecond float64  `json:"setup_bookings_per_second"`
	// Percentiles are the lag's 0th to 100th percentiles in ms, for charts.
	Percentiles []float64 `json:"percentiles_ms"`
	// Load is the busy case's confirm load as achieved, pooled over the runs.
	Load *LoadStats `json:"confirm_load,omitempty"`
	// Contention is what the process waited for while the bookings fell due, the worst run's.
	Contention *Contention `json:"contention,omitempty"`
	Note       string      `json:"note,omitempty"`

	lags []time.Duration // sorted, pooled; for the chart
}

// Goal is one of the done-when figures, checked.
type Goal struct {
	Name   string `json:"name"`
	Target string `json:"target"`
	Got    string `json:"got"`
	Met    bool   `json:"met"`
	Note   string `json:"note,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func optMs(d time.Duration) *float64 {
	if d < 0 {
		return nil
	}
	v := ms(d)
	return &v
}

// quantile is the nearest-rank q-quantile of sorted lags.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// pool merges the measurements of one design and case over the runs into a row.
func pool(runs []*measurement) Row {
	m0 := runs[0]
	r := Row{Design: m0.design, Label: m0.label, Case: m0.c, Computed: m0.computed, Runs: len(runs)}
	var maxLag, last, seen, units time.Duration
	seenAll, unitsAll := true, true
	bytes, nBytes := 0.0, 0
	r.PerSecond = math.Inf(1)
	var notes []string
	var loads []*LoadStats
	var contention []*Contention
	for _, m := range runs {
		if m.load != nil {
			loads = append(loads, m.load)
		}
		contention = append(contention, m.contention)
		r.Bookings += m.n
		r.Released += m.released
		r.Early += m.early
		r.lags = append(r.lags, m.lags...)
		maxLag, last = max(maxLag, m.maxLag), max(last, m.last)
		seen, seenAll = max(seen, m.observed), seenAll && m.observed >= 0
		units, unitsAll = max(units, m.unitsBack), unitsAll && m.unitsBack >= 0
		r.PerSecond = min(r.PerSecond, m.perSecond)
		r.SetupPerSecond += m.setupPerSecond / float64(len(runs))
		if m.redisBytes >= 0 {
			bytes += m.redisBytes
			nBytes++
		}
		if m.note != "" && !slices.Contains(notes, m.note) {
			notes = append(notes, m.note)
		}
	}
	slices.Sort(r.lags)
	if len(r.lags) > 0 {
		maxLag = max(maxLag, r.lags[len(r.lags)-1])
		r.MinMs = ms(r.lags[0])
	}
	r.P50Ms, r.P90Ms = ms(quantile(r.lags, 0.5)), ms(quantile(r.lags, 0.9))
	r.P99Ms, r.P999Ms = ms(quantile(r.lags, 0.99)), ms(quantile(r.lags, 0.999))
	r.MaxMs, r.LastMs = ms(maxLag), ms(last)
	if seenAll {
		r.SeenMs = optMs(seen)
	}
	if unitsAll {
		r.UnitsBackMs = optMs(units)
	}
	if math.IsInf(r.PerSecond, 1) {
		r.PerSecond = 0
	}
	if nBytes > 0 {
		b := bytes / float64(nBytes)
		r.RedisBytes = &b
	}
	for p := 0; p <= 100; p++ {
		r.Percentiles = append(r.Percentiles, ms(quantile(r.lags, float64(p)/100)))
	}
	if len(r.lags) > 0 {
		r.Percentiles[100] = ms(maxLag)
	}
	r.Load, r.Contention = poolLoads(loads), worstContention(contention)
	r.Note = strings.Join(notes, "; ")
	return r
}

// goals checks the done-when figures against slotwheel's rows.
func goals(rep *Report, cfg Config) []Goal {
	var out []Goal
	small := func(k Case) string {
		if k == CaseBurst && cfg.Burst < DefaultBurst || k == CaseSteady && (cfg.SteadyRate < DefaultSteadyRate || cfg.SteadySeconds < DefaultSteadySeconds) ||
			k == CaseBusy && (cfg.BusyRate < DefaultBusyRate || cfg.BusySeconds < DefaultBusySeconds || cfg.BusyConfirmRate < DefaultBusyConfirms) {
			return "measured at a smaller size than the issue's"
		}
		return ""
	}
	for _, r := range rep.Rows {
		if r.Design != DesignSlotwheel {
			continue
		}
		if r.Failed {
			out = append(out, Goal{Name: "slotwheel " + string(r.Case), Target: "a measurement", Got: r.Note, Note: small(r.Case)})
			continue
		}
		switch r.Case {
		case CaseBurst:
			g := Goal{Name: "burst fully released, units back", Target: "≤ 1000 ms after release_at, none early, all released", Note: small(CaseBurst)}
			seen, units := -1.0, -1.0
			if r.SeenMs != nil {
				seen = *r.SeenMs
			}
			if r.UnitsBackMs != nil {
				units = *r.UnitsBackMs
			}
			g.Got = fmt.Sprintf("RELEASED in SQL %s, units back %s, last released_at %s, %d early, %d/%d released",
				fmtMsOpt(r.SeenMs), fmtMsOpt(r.UnitsBackMs), fmtMs(r.LastMs), r.Early, r.Released, r.Bookings)
			g.Met = seen >= 0 && seen <= 1000 && units >= 0 && units <= 1000 && r.Early == 0 && r.Released == r.Bookings
			out = append(out, g)
		case CaseSteady:
			g := Goal{Name: "steady releases on time", Target: "p99 ≤ 50 ms, max ≤ 250 ms, none early, all released", Note: small(CaseSteady)}
			g.Got = fmt.Sprintf("p99 %s, max %s, %d early, %d/%d released", fmtMs(r.P99Ms), fmtMs(r.MaxMs), r.Early, r.Released, r.Bookings)
			g.Met = r.P99Ms <= 50 && r.MaxMs <= 250 && r.Early == 0 && r.Released == r.Bookings
			out = append(out, g)
		case CaseBusy:
			out = append(out, busyGoal(r, small(CaseBusy)))
		}
		if r.RedisBytes != nil {
			out = append(out, Goal{Name: "Redis bytes per confirmed booking within the horizon (" + string(r.Case) + ")",
				Target: "≤ 700", Got: fmt.Sprintf("%.0f", *r.RedisBytes), Met: *r.RedisBytes <= 700,
				Note: "INFO used_memory while the bookings were made; other clients of the same Redis count too"})
		}
	}
	return out
}

// busyGoal checks the busy case: releases on time while the confirm load runs at its rate (a load
// that fell short of it would make the goal easier than the issue's).
func busyGoal(r Row, note string) Goal {
	g := Goal{Name: "busy releases on time", Target: fmt.Sprintf("p99 ≤ %.0f ms, none early, all released, with the confirm load at ≥ %.0f%% of its rate",
		busyP99GoalMs, 100*busyLoadShare), Note: note}
	load, loadMet := "no confirm load measured", false
	if l := r.Load; l != nil {
		load = fmt.Sprintf("beside %.0f confirms/s of %.0f (confirm p99 %s, %d errors)", l.PerSecond, l.TargetPerSecond, fmtMs(l.P99Ms), l.Errors)
		loadMet = l.PerSecond >= busyLoadShare*l.TargetPerSecond
	}
	g.Got = fmt.Sprintf("p99 %s, max %s, %d early, %d/%d released, %s", fmtMs(r.P99Ms), fmtMs(r.MaxMs), r.Early, r.Released, r.Bookings, load)
	g.Met = r.P99Ms <= busyP99GoalMs && r.Early == 0 && r.Released == r.Bookings && loadMet
	return g
}

// The busy case's goal: the p99, and the share of the load's rate it must be met beside.
const (
	busyP99GoalMs = 100.0
	busyLoadShare = 0.9
)

// WriteJSON writes the report to path.
func (rep *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteTable writes the report as one text table, its notes and the goals.
func (rep *Report) WriteTable(w io.Writer) error {
	c := rep.Config
	fmt.Fprintf(w, "slotwheel bench release — %s\n", rep.Started.Format(time.RFC3339))
	fmt.Fprintf(w, "backends: %s; host: %d CPUs, %s/%s, %s\n", rep.Backends, rep.Host.CPUs, rep.Host.GOOS, rep.Host.GOARCH, rep.Host.Go)
	var cases []string
	for _, k := range c.Cases {
		switch k {
		case CaseBurst:
			cases = append(cases, fmt.Sprintf("burst: %d bookings due at one instant", c.Burst))
		case CaseSteady:
			cases = append(cases, fmt.Sprintf("steady: %d/s for %d s (%d bookings)", c.SteadyRate, c.SteadySeconds, c.SteadyRate*c.SteadySeconds))
		case CaseBusy:
			cases = append(cases, fmt.Sprintf("busy: %d/s for %d s (%d bookings) while %d confirms/s run", c.BusyRate, c.BusySeconds,
				c.BusyRate*c.BusySeconds, c.BusyConfirmRate))
		}
	}
	fmt.Fprintf(w, "%s\nruns: %d; slotwheel: %d venue(s), release workers: %s\n\n", strings.Join(cases, "; "), c.Runs, c.Venues,
		concurrencyText(c.Concurrency))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "design\tcase\tbookings\tp50\tp99\tmax\tearly\tlast released_at\tall RELEASED seen\tunits back seen\treleases/s\tRedis B/booking\t")
	computed := false
	for _, r := range rep.Rows {
		if r.Failed {
			fmt.Fprintf(tw, "%s\t%s\tfailed (see the note)\t\t\t\t\t\t\t\t\t\t\n", r.Label, r.Case)
			continue
		}
		label := r.Label
		if r.Computed {
			label += " *"
			computed = true
		}
		released := fmt.Sprint(r.Bookings)
		if r.Released != r.Bookings {
			released = fmt.Sprintf("%d of %d", r.Released, r.Bookings)
		}
		bytes := "—"
		if r.RedisBytes != nil {
			bytes = fmt.Sprintf("%.0f", *r.RedisBytes)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", label, r.Case, released,
			fmtMs(r.P50Ms), fmtMs(r.P99Ms), fmtMs(r.MaxMs), r.Early, fmtMs(r.LastMs), fmtMsOpt(r.SeenMs),
			fmtMsOpt(r.UnitsBackMs), fmtRate(r.PerSecond), bytes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "lag = released_at − release_at as written in SQL (slotwheel stamps a batch when it starts; the anchors' NOW(3) is")
	fmt.Fprintln(w, "the statement's start); \"last released_at\" = latest released_at − latest release_at; \"seen\" = polled from")
	fmt.Fprintln(w, "outside every 10 ms after the latest release_at (commits visible; units free in Redis's availability);")
	fmt.Fprintln(w, "releases/s = bookings ÷ (first release_at → all seen released).")
	if computed {
		fmt.Fprintf(w, "* computed, not waited for: the same release_at values polled every %s at a uniformly random phase, each\n",
			time.Duration(c.ComputedSeconds*float64(time.Second)))
		fmt.Fprintln(w, "  UPDATE taking what this run's measured UPDATEs took for as many rows (fixed cost + per-row cost); lags include")
		fmt.Fprintln(w, "  the UPDATE's duration; \"last\" and releases/s are the worst phase's.")
	}
	if err := rep.writeContention(w); err != nil {
		return err
	}
	for _, r := range rep.Rows {
		if r.Note != "" {
			fmt.Fprintf(w, "note (%s, %s): %s\n", r.Label, r.Case, r.Note)
		}
	}
	if len(rep.Goals) > 0 {
		fmt.Fprintln(w, "\ngoals:")
		for _, g := range rep.Goals {
			mark := "MET    "
			if !g.Met {
				mark = "NOT MET"
			}
			fmt.Fprintf(w, "  %s  %s: %s — target %s", mark, g.Name, g.Got, g.Target)
			if g.Note != "" {
				fmt.Fprintf(w, " (%s)", g.Note)
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}

// writeContention writes, for the measured rows, what ran beside the releases and what the process
// waited for while they fell due: the busy case's confirm load as achieved (when a row has one), the
// design's MySQL pool, and the Go scheduler.
func (rep *Report) writeContention(w io.Writer) error {
	var rows []Row
	path, loads := "", false
	for _, r := range rep.Rows {
		if r.Failed || r.Contention == nil {
			continue
		}
		rows = append(rows, r)
		if r.Load != nil {
			loads = true
			if r.Design == DesignSlotwheel {
				path = r.Load.Path
			}
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nwhile the bookings fell due (first release_at → all seen released):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "design\tcase\t"
	if loads {
		head += "confirms/s (target)\tconfirm p50\tconfirm p99\tconfirm max\tconfirm errors\t"
	}
	fmt.Fprintln(tw, head+"pool in use (max)\tpool waits\tpool wait\tconns closed idle\trunnable p99\t")
	for _, r := range rows {
		line := r.Label + "\t" + string(r.Case) + "\t"
		if l := r.Load; l != nil {
			line += fmt.Sprintf("%.0f (%.0f)\t%s\t%s\t%s\t%d\t", l.PerSecond, l.TargetPerSecond, fmtMs(l.P50Ms), fmtMs(l.P99Ms), fmtMs(l.MaxMs), l.Errors)
		} else if loads {
			line += strings.Repeat("—\t", 5)
		}
		c := r.Contention
		fmt.Fprintf(tw, "%s%d of %d\t%d\t%s\t%d\t%s\t\n", line, c.PoolMaxInUse, c.PoolMaxOpen, c.PoolWaits, fmtMs(c.PoolWaitMs),
			c.PoolClosedIdle, fmtMs(c.RunnableP99Ms))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if loads {
		fmt.Fprintln(w, "confirms/s: the busy case's load — a hold, then a confirm of one unit on other slots, started on a fixed")
		fmt.Fprintf(w, "schedule — through %s;\n", orElse(path, "the instance under test's engine"))
		fmt.Fprintln(w, "beside an anchor, through a slotwheel instance of its own (same servers, same process). confirm p50/p99/max:")
		fmt.Fprintln(w, "the confirm call alone.")
	}
	fmt.Fprintln(w, "pool: the design's own MySQL pool (slotwheel's is the instance's, shared by its loops, worker and API); pool")
	fmt.Fprintln(w, "wait = time spent waiting for a connection, summed; conns closed idle = connections closed on their return")
	fmt.Fprintln(w, "as the pool kept its most idle ones already (each is reopened when needed); runnable p99 = how long")
	fmt.Fprintln(w, "goroutines of this process waited for a CPU (the Go scheduler's latency, a bucket's upper bound).")
	return nil
}

func orElse(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func concurrencyText(n int) string {
	if n <= 0 {
		return "jobs' default"
	}
	return fmt.Sprint(n)
}

// fmtMs prints a lag readably: sub-millisecond to minutes.
func fmtMs(v float64) string {
	d := time.Duration(v * float64(time.Millisecond))
	abs := d
	if abs < 0 {
		abs = -abs
	}
	switch {
	case abs < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", v)
	case abs < time.Second:
		return fmt.Sprintf("%.0fms", v)
	case abs < 100*time.Second:
		return fmt.Sprintf("%.2fs", v/1000)
	default:
		return fmt.Sprintf("%.0fs", v/1000)
	}
}

func fmtRate(v float64) string {
	if v >= 10 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2g", v)
}

func fmtMsOpt(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmtMs(*v)
}
