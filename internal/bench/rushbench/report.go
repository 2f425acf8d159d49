package rushbench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/slotwheel/slotwheel/internal/bench/releasebench"
	"github.com/slotwheel/slotwheel/models"
)

// Report is one run: where it ran, how it was sized, a row per design and wave, each design's own
// account of what it sold, and the goals checked against the rows.
type Report struct {
	Started  time.Time         `json:"started"`
	Backends string            `json:"backends"`
	Host     releasebench.Host `json:"host"`
	// Load is /proc/loadavg's 1, 5 and 15 minute averages when the run began: other work on the
	// machine shares its CPUs with the servers measured.
	Load   string       `json:"load_average_at_start,omitempty"`
	Config ReportConfig `json:"config"`
	Rows   []Row        `json:"rows"`
	Checks []Check      `json:"server_checks"`
	// CPUSources say where each CPU figure was read, and what it covers.
	CPUSources []string            `json:"cpu_sources"`
	Notes      []string            `json:"notes,omitempty"`
	Goals      []releasebench.Goal `json:"goals"`
	Logs       []string            `json:"logs"` // the children's logs
}

// ReportConfig is Config as the report states it.
type ReportConfig struct {
	Clients        int      `json:"clients"`
	Resources      int      `json:"resources"`
	Slots          int      `json:"slots"`
	Capacity       int      `json:"capacity"`
	Units          int      `json:"units"`
	SecondWave     int      `json:"second_wave_clients"`
	Conns          int      `json:"connections"`
	Runs           int      `json:"runs"`
	Seed           uint64   `json:"seed"`
	TimeoutSeconds float64  `json:"timeout_seconds"`
	Designs        []Design `json:"designs"`
	MySQLMaxOpen   int      `json:"mysql_max_open_conns"`
	MySQLMaxIdle   int      `json:"mysql_max_idle_conns"`
}

func (c Config) forReport(pool models.Pool) ReportConfig {
	pool = pool.WithDefaults()
	return ReportConfig{MySQLMaxOpen: pool.MaxOpen, MySQLMaxIdle: pool.MaxIdle, Clients: c.Clients, Resources: c.Resources, Slots: c.Slots, Capacity: c.Capacity, Units: c.units(),
		SecondWave: c.SecondWave, Conns: c.Conns, Runs: c.Runs, Seed: c.Seed, TimeoutSeconds: c.Timeout.Seconds(), Designs: c.designs()}
}

// Row is one design in one wave, pooled over the runs: counts and CPU are summed (CPU per answer
// is their quotient), latencies pooled; the sold-out time and answers per second are the worst
// run's.
type Row struct {
	Design Design `json:"design"`
	Label  string `json:"label"`
	Wave   Wave   `json:"wave"`
	// Failed marks a row no run measured; Note says why (and which runs failed otherwise).
	Failed  bool   `json:"failed,omitempty"`
	Note    string `json:"note,omitempty"`
	Runs    int    `json:"runs"`
	Clients int    `json:"clients_per_run"`
	// Answers are the HTTP answers, whatever their status; Sales are 201s, Refusals 409 slot_full,
	// and Errors everything else, no answer at all included (ErrorKinds tallies them).
	Answers    int            `json:"answers"`
	Sales      int            `json:"sales"`
	Refusals   int            `json:"refusals"`
	Errors     int            `json:"errors"`
	ErrorKinds map[string]int `json:"error_kinds,omitempty"`
	// Oversold counts the 201s beyond their slot's capacity, as the clients saw them: in the
	// second wave, a sale of a slot the rush sold out counts.
	Oversold int `json:"oversold"`
	// SoldOutMs is from the gate to the 201 that sold the last unit; absent when a run did not
	// sell every unit (or in the second wave).
	SoldOutMs        *float64 `json:"sold_out_ms,omitempty"`
	LastAnswerMs     float64  `json:"last_answer_ms"`
	AnswersPerSecond float64  `json:"answers_per_second"` // answers ÷ (gate → last answer)
	// Latencies are from the gate, when every client asked, until its answer was read.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	CPU   CPU     `json:"cpu_per_answer_us"`
	// PerRun are each run's own figures, for judging the spread of several.
	PerRun []RunFigures `json:"per_run"`

	sold, answered []time.Duration // pooled arrival times, for the chart
}

// RunFigures are one run's sold-out time (absent: not sold out) and answers per second.
type RunFigures struct {
	SoldOutMs        *float64 `json:"sold_out_ms,omitempty"`
	AnswersPerSecond float64  `json:"answers_per_second"`
}

// CPU is CPU time per answer in µs, by process; absent where it was not read (CPUSources).
type CPU struct {
	Server  *float64 `json:"server,omitempty"`  // the design's own process
	Redis   *float64 `json:"redis,omitempty"`   // the whole Redis server
	MariaDB *float64 `json:"mariadb,omitempty"` // the MySQL server process
	// Design is what the design uses: its process and MariaDB, and Redis for slotwheel. Partial
	// marks a sum missing a part that was not read.
	Design  float64  `json:"design"`
	Partial bool     `json:"design_partial,omitempty"`
	Client  *float64 `json:"client,omitempty"` // this process: the clients, for comparison
}

// Check is a design's own account of what it sold, read from it after every wave.
type Check struct {
	Design Design `json:"design"`
	Label  string `json:"label"`
	Runs   int    `json:"runs"`
	Source string `json:"source"`
	Sales  int    `json:"sales"` // 201s the clients got, over every wave
	Taken  int    `json:"units_taken"`
	// OversoldSlots are the slots whose units taken exceed their capacity, by OversoldUnits.
	OversoldSlots int `json:"oversold_slots"`
	OversoldUnits int `json:"oversold_units"`
}

func (c *Check) add(capacity, taken int) {
	c.Taken += taken
	if taken > capacity {
		c.OversoldSlots++
		c.OversoldUnits += taken - capacity
	}
}

// waveResult is one wave of one measurement.
type waveResult struct {
	wave     Wave
	clients  int
	answers  []answer // sorted by arrival
	oversold int      // sales beyond capacity (countSales)
	cpu      cpuUse   // used from just before the gate until the last answer
}

func (r *waveResult) sales() int {
	n := 0
	for _, a := range r.answers {
		if a.sale() {
			n++
		}
	}
	return n
}

// soldOut is when the last unit was sold: the latest of the instants each slot's capacity-th sale
// arrived, slots being the number of slots; false when some slot was not sold out.
func soldOut(answers []answer, slots, capacity int) (time.Duration, bool) {
	n := make([]int, slots)
	full := 0
	for _, a := range answers {
		if !a.sale() {
			continue
		}
		if n[a.slot]++; n[a.slot] == capacity {
			if full++; full == slots {
				return a.at, true
			}
		}
	}
	return 0, false
}

// pool merges one design's measurements of wave w into a row.
func pool(cfg Config, d Design, w Wave, runs []*measurement, failures []string) Row {
	r := Row{Design: d, Label: d.Label(), Wave: w, Runs: len(runs), Clients: cfg.clients(w), ErrorKinds: map[string]int{}}
	if len(failures) > 0 {
		r.Note = fmt.Sprintf("%d of %d runs failed: %s", len(failures), cfg.Runs, strings.Join(failures, "; "))
	}
	if len(runs) == 0 {
		r.Failed = true
		return r
	}
	var lat []time.Duration
	var cpu cpuUse
	r.AnswersPerSecond = math.Inf(1)
	var worstSoldOut time.Duration
	allSoldOut := w == WaveRush
	for i, m := range runs {
		res := m.waves[w]
		answers, last := 0, time.Duration(0)
		for _, a := range res.answers {
			switch {
			case a.sale():
				r.Sales++
				r.sold = append(r.sold, a.at)
			case a.refusal():
				r.Refusals++
			default:
				r.Errors++
				r.ErrorKinds[a.kind()]++
			}
			if a.answered() {
				answers++
				last = a.at
				lat = append(lat, a.at)
				r.answered = append(r.answered, a.at)
			}
		}
		r.Answers += answers
		r.Oversold += res.oversold
		r.LastAnswerMs = max(r.LastAnswerMs, ms(last))
		var fig RunFigures
		if last > 0 {
			fig.AnswersPerSecond = float64(answers) / last.Seconds()
			r.AnswersPerSecond = min(r.AnswersPerSecond, fig.AnswersPerSecond)
		}
		t, ok := soldOut(res.answers, cfg.Resources*cfg.Slots, cfg.Capacity)
		if ok && w == WaveRush {
			v := ms(t)
			fig.SoldOutMs = &v
		}
		r.PerRun = append(r.PerRun, fig)
		if ok {
			worstSoldOut = max(worstSoldOut, t)
		} else if allSoldOut {
			allSoldOut = false
			r.Note = joinNote(r.Note, fmt.Sprintf("run %d did not sell every unit", i+1))
		}
		if i == 0 {
			cpu = res.cpu
		} else {
			cpu = cpu.plus(res.cpu)
		}
	}
	if math.IsInf(r.AnswersPerSecond, 1) {
		r.AnswersPerSecond = 0
	}
	if allSoldOut {
		v := ms(worstSoldOut)
		r.SoldOutMs = &v
	}
	slices.Sort(lat)
	slices.Sort(r.sold)
	slices.Sort(r.answered)
	r.P50Ms, r.P99Ms, r.MaxMs = ms(nearestRank(lat, 0.50)), ms(nearestRank(lat, 0.99)), ms(nearestRank(lat, 1))
	r.CPU = perAnswer(d, cpu, r.Answers)
	if len(r.ErrorKinds) == 0 {
		r.ErrorKinds = nil
	}
	return r
}

// plus is u + v, per source; a source either did not read stays unread.
func (u cpuUse) plus(v cpuUse) cpuUse {
	add := func(a, b time.Duration) time.Duration {
		if a < 0 || b < 0 {
			return -1
		}
		return a + b
	}
	return cpuUse{server: add(u.server, v.server), redis: add(u.redis, v.redis), mariadb: add(u.mariadb, v.mariadb),
		client: add(u.client, v.client)}
}

// perAnswer divides CPU time among n answers, in µs.
func perAnswer(d Design, u cpuUse, n int) CPU {
	us := func(t time.Duration) *float64 {
		if t < 0 || n == 0 {
			return nil
		}
		v := float64(t) / float64(time.Microsecond) / float64(n)
		return &v
	}
	c := CPU{Server: us(u.server), Redis: us(u.redis), MariaDB: us(u.mariadb), Client: us(u.client)}
	parts := []*float64{c.Server, c.MariaDB}
	if d == DesignSlotwheel {
		parts = append(parts, c.Redis)
	}
	for _, p := range parts {
		if p == nil {
			c.Partial = true
			continue
		}
		c.Design += *p
	}
	return c
}

// nearestRank is the nearest-rank q-quantile of sorted durations.
func nearestRank(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(max(int(math.Ceil(q*float64(len(sorted))))-1, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// poolChecks adds up a design's own accounts over its runs.
func poolChecks(d Design, runs []*measurement) Check {
	c := Check{Design: d, Label: d.Label(), Runs: len(runs), Source: runs[0].check.Source}
	for _, m := range runs {
		c.Sales += m.check.Sales
		c.Taken += m.check.Taken
		c.OversoldSlots += m.check.OversoldSlots
		c.OversoldUnits += m.check.OversoldUnits
	}
	return c
}

// cpuSources say where the CPU figures come from.
func cpuSources(done map[Design][]*measurement) []string {
	out := []string{
		"server: the design's own process (slotwheel's `all`, or the plain SQL server), utime+stime of /proc/<pid>/stat, read to 10 ms",
		"Redis: INFO cpu used_cpu_sys+used_cpu_user of the whole server, every client of it included (slotwheel's background loops and Asynq's polling, and anything else using this Redis)",
	}
	var notes []string
	for _, d := range slices.Sorted(maps.Keys(done)) {
		for _, m := range done[d] {
			if !slices.Contains(notes, m.cpuNote) {
				notes = append(notes, m.cpuNote)
			}
		}
	}
	out = append(out, notes...)
	return append(out, "client: this process, whose goroutines are the clients; it shares the machine's CPUs with the servers")
}

// goals checks the done-when figures.
func goals(rep *Report, cfg Config) []releasebench.Goal {
	sw, sq := rep.row(DesignSlotwheel, WaveRush), rep.row(DesignSQL, WaveRush)
	note := ""
	if cfg.Clients < DefaultClients || cfg.units() < DefaultResources*DefaultSlots*DefaultCapacity {
		note = "measured at a smaller size than the issue's"
	}
	both := sw != nil && sq != nil && !sw.Failed && !sq.Failed
	const unmeasured = "not measured: both designs are needed"

	soldOut := releasebench.Goal{Name: "sold out", Target: "slotwheel in ≤ ½ the plain SQL design's time", Got: unmeasured, Note: note}
	if both {
		soldOut.Got = fmt.Sprintf("slotwheel %s, plain SQL %s", fmtMsOpt(sw.SoldOutMs), fmtMsOpt(sq.SoldOutMs))
		if sw.SoldOutMs != nil && sq.SoldOutMs != nil {
			soldOut.Got += fmt.Sprintf(" (%.2f×)", *sw.SoldOutMs / *sq.SoldOutMs)
			soldOut.Met = *sw.SoldOutMs <= *sq.SoldOutMs/2
		}
	}
	rate := releasebench.Goal{Name: "answers/s in the rush", Target: "slotwheel ≥ 2× the plain SQL design's", Got: unmeasured, Note: note}
	if both {
		rate.Got = fmt.Sprintf("slotwheel %.0f, plain SQL %.0f", sw.AnswersPerSecond, sq.AnswersPerSecond)
		if sq.AnswersPerSecond > 0 {
			rate.Got += fmt.Sprintf(" (%.2f×)", sw.AnswersPerSecond/sq.AnswersPerSecond)
			rate.Met = sw.AnswersPerSecond >= 2*sq.AnswersPerSecond
		}
	}
	oversold := releasebench.Goal{Name: "oversold", Target: "0 on both designs, as the clients saw it and in each design's own account",
		Got: unmeasured, Note: note}
	if both {
		var got []string
		oversold.Met = true
		for _, d := range Designs {
			clients := 0
			for _, r := range rep.Rows {
				if r.Design == d {
					clients += r.Oversold
				}
			}
			server := "not read"
			if c := rep.check(d); c != nil {
				server = fmt.Sprint(c.OversoldUnits)
				oversold.Met = oversold.Met && c.OversoldUnits == 0
			} else {
				oversold.Met = false
			}
			oversold.Met = oversold.Met && clients == 0
			got = append(got, fmt.Sprintf("%s %d by the clients, %s by itself", d.Label(), clients, server))
		}
		oversold.Got = strings.Join(got, "; ")
	}
	cpu := releasebench.Goal{Name: "slotwheel's CPU per hold in the rush", Target: "process + Redis ≤ 100 µs", Got: "not measured",
		Note: joinNote(note, "Redis is the whole server's INFO cpu")}
	if sw != nil && !sw.Failed {
		if s, r := sw.CPU.Server, sw.CPU.Redis; s != nil && r != nil {
			cpu.Got = fmt.Sprintf("%.0f µs (process %.0f + Redis %.0f)", *s+*r, *s, *r)
			cpu.Met = *s+*r <= 100
		} else {
			cpu.Got = "not read (see the CPU sources)"
		}
	}
	return []releasebench.Goal{soldOut, rate, oversold, cpu}
}

func (rep *Report) row(d Design, w Wave) *Row {
	for i := range rep.Rows {
		if rep.Rows[i].Design == d && rep.Rows[i].Wave == w {
			return &rep.Rows[i]
		}
	}
	return nil
}

func (rep *Report) check(d Design) *Check {
	for i := range rep.Checks {
		if rep.Checks[i].Design == d {
			return &rep.Checks[i]
		}
	}
	return nil
}

// Write writes the report into dir as bench-rush.json and its chart as bench-rush.png, and
// returns the paths it wrote. The JSON is written even when the chart cannot be drawn.
func (rep *Report) Write(dir string) ([]string, error) {
	jsonPath, pngPath := filepath.Join(dir, "bench-rush.json"), filepath.Join(dir, "bench-rush.png")
	b, err := json.MarshalIndent(rep, "", "  ")
	if err == nil {
		err = os.WriteFile(jsonPath, append(b, '\n'), 0o644)
	}
	if err != nil {
		return nil, err
	}
	if err := rep.WriteChart(pngPath); err != nil {
		return []string{jsonPath}, fmt.Errorf("chart: %w", err)
	}
	return []string{jsonPath, pngPath}, nil
}

// WriteTable writes the report as one text table, what its figures mean, and the goals.
func (rep *Report) WriteTable(w io.Writer) error {
	c := rep.Config
	fmt.Fprintf(w, "slotwheel bench rush — %s\n", rep.Started.Format(time.RFC3339))
	fmt.Fprintf(w, "backends: %s; host: %d CPUs, %s/%s, %s; load average at start: %s\n", rep.Backends, rep.Host.CPUs,
		rep.Host.GOOS, rep.Host.GOARCH, rep.Host.Go, cmp.Or(rep.Load, "not read"))
	fmt.Fprintf(w, "rush: %d clients at one gate for %d units (%d resources × %d slots × capacity %d), each with its own token and\n",
		c.Clients, c.Units, c.Resources, c.Slots, c.Capacity)
	fmt.Fprintf(w, "Idempotency-Key, over %d keep-alive connections; after sell-out: %d more; runs: %d; seed: %d; MySQL pool of each\n",
		c.Conns, c.SecondWave, c.Runs, c.Seed)
	fmt.Fprintf(w, "design: %d connections (%d idle)\n\n", c.MySQLMaxOpen, c.MySQLMaxIdle)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "design\twave\tclients\tsold out\tanswers/s\tp50\tp99\tmax\tsales\trefusals\terrors\toversold\t"+
		"CPU µs/answer: server\tRedis\tMariaDB\tdesign\tclient")
	for _, r := range rep.Rows {
		if r.Failed {
			fmt.Fprintf(tw, "%s\t%s\tfailed (see the note)\n", r.Label, r.Wave)
			continue
		}
		soldOut := "—"
		if r.Wave == WaveRush {
			soldOut = fmtMsOpt(r.SoldOutMs)
		}
		design := fmtUs(&r.CPU.Design)
		if r.CPU.Partial {
			design += "+"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.0f\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Label, r.Wave, r.Clients*r.Runs,
			soldOut, r.AnswersPerSecond, fmtDur(r.P50Ms), fmtDur(r.P99Ms), fmtDur(r.MaxMs), r.Sales, r.Refusals, r.Errors, r.Oversold,
			fmtUs(r.CPU.Server), fmtUs(r.CPU.Redis), fmtUs(r.CPU.MariaDB), design, fmtUs(r.CPU.Client))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprint(w, `
Every client asks at the gate. sold out = gate → the 201 that sold the last unit; answers/s = HTTP answers ÷ (gate → last
answer); p50/p99/max = gate → answer read; sales = 201, refusals = 409 slot_full, errors = anything else (no answer
included); oversold = 201s beyond their slot's capacity, as the clients saw them over both waves. CPU per answer: the CPU
each process used from the gate to the last answer ÷ the answers; design = what the design uses (its process and
MariaDB, and Redis for slotwheel; "+": a part was not read).
`)
	for _, s := range rep.CPUSources {
		fmt.Fprintln(w, "  "+s)
	}
	for _, ch := range rep.Checks {
		fmt.Fprintf(w, "own account of %s (%s): %d units taken for %d sales, %d slots oversold by %d units\n",
			ch.Label, ch.Source, ch.Taken, ch.Sales, ch.OversoldSlots, ch.OversoldUnits)
	}
	for _, r := range rep.Rows {
		if len(r.ErrorKinds) > 0 {
			fmt.Fprintf(w, "errors (%s, %s): %s\n", r.Label, r.Wave, tally(r.ErrorKinds))
		}
		if r.Note != "" {
			fmt.Fprintf(w, "note (%s, %s): %s\n", r.Label, r.Wave, r.Note)
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if len(rep.Logs) > 0 {
		fmt.Fprintln(w, "servers' logs:", strings.Join(rep.Logs, ", "))
	}
	fmt.Fprintln(w, "\ngoals:")
	for _, g := range rep.Goals {
		mark := map[bool]string{true: "MET   ", false: "MISSED"}[g.Met]
		line := fmt.Sprintf("  %s  %s: %s — target %s", mark, g.Name, g.Got, g.Target)
		if g.Note != "" {
			line += " (" + g.Note + ")"
		}
		fmt.Fprintln(w, line)
	}
	return nil
}

// tally lists error kinds, most frequent first: "503 backend_unavailable ×12, 500 internal ×1".
func tally(kinds map[string]int) string {
	ks := slices.SortedFunc(maps.Keys(kinds), func(a, b string) int {
		if kinds[a] != kinds[b] {
			return kinds[b] - kinds[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s ×%d", k, kinds[k])
	}
	return strings.Join(parts, ", ")
}

// fmtDur prints milliseconds as a duration rounded to what matters at its size.
func fmtDur(v float64) string {
	d := time.Duration(v * float64(time.Millisecond))
	unit := 10 * time.Millisecond
	switch {
	case d < 10*time.Millisecond:
		unit = 100 * time.Microsecond
	case d < time.Second:
		unit = time.Millisecond
	}
	return d.Round(unit).String()
}

func fmtMsOpt(v *float64) string {
	if v == nil {
		return "not sold out"
	}
	return fmtDur(*v)
}

func fmtUs(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.0f", *v)
}
