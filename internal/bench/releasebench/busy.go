package releasebench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/loop"
)

// The busy case: bookings fall due as in the steady case while customers book other slots
// through the same deployment. Its confirm load runs from loadLead before the first release_at
// until every booking is seen released, or loadTail after the latest release_at (a tail that long
// has missed the goal by far; the load stops, so that it cannot outrun its slots' capacity).
const (
	loadLead = 2 * time.Second
	loadTail = 10 * time.Second
	// loadResources × loadSlots are the slots the load books, one unit each: spread, as bookings
	// of a venue's courts over a day are, so that confirms do not queue on one ledger row.
	loadResources = 20
	loadSlots     = 10
	// loadInFlight bounds the load's operations under way; past it the load falls behind its
	// rate, which the report shows.
	loadInFlight = 512
	// loadAhead puts the load's slots this far ahead: their release_at is beyond the release horizon,
	// so that their confirms queue no release task, as bookings made ahead of time do not.
	loadAhead = 3 * time.Hour
)

// confirmLoad makes holds and confirms them at a steady rate, as customers paying for other slots
// would, through an engine of the deployment: the instance under test's own (its pool, its
// clock, its loops), or, beside an anchor, a slotwheel instance of its own.
type confirmLoad struct {
	eng   *engine.Engine
	path  string
	rate  int
	slots []loadSlot

	// closeFn, when set, ends the instance the load books through (an anchor's).
	closeFn func() error

	mu       sync.Mutex
	lats     []time.Duration // of the confirms that succeeded
	errs     int
	firstErr string
	next     atomic.Int64
}

// close ends what the load books through, when it is its own.
func (l *confirmLoad) close() error {
	if l == nil || l.closeFn == nil {
		return nil
	}
	return l.closeFn()
}

// anchorLoad is the confirm load of an anchor's busy case (nil in the other cases): a slotwheel
// instance beside the anchor, on the same servers and in the same process.
func anchorLoad(ctx context.Context, env *Env, cfg Config, s spec, p *Progress) (*confirmLoad, error) {
	if s.c != CaseBusy {
		return nil, nil
	}
	p.Stage("starting the confirm load's instance", 0)
	return startLoadInstance(ctx, env, cfg.BusyConfirmRate, cfg.loadDuration())
}

// loadSlot is one slot the load books.
type loadSlot struct {
	resource   uint64
	start, end time.Time
}

// newConfirmLoad creates the load's venue (loadResources resources of one-hour slots) in eng, with
// room for rate confirms a second for seconds.
func newConfirmLoad(ctx context.Context, eng *engine.Engine, path string, rate int, seconds time.Duration) (*confirmLoad, error) {
	loc, err := time.LoadLocation(benchZone)
	if err != nil {
		return nil, err
	}
	l := &confirmLoad{eng: eng, path: path, rate: rate}
	perSlot := int(math.Ceil(float64(rate)*seconds.Seconds()/float64(loadResources*loadSlots))) + 10
	v, err := eng.CreateVenue(ctx, booking.System, engine.VenueInput{Name: "bench release load", Timezone: benchZone})
	if err != nil {
		return nil, err
	}
	first := hourStart(time.Now().Add(loadAhead), loc)
	for i := range loadResources {
		r, err := eng.CreateResource(ctx, booking.System, engine.ResourceInput{VenueID: v.ID, Name: fmt.Sprintf("court %d", i),
			Kind: "court", Capacity: perSlot})
		if err != nil {
			return nil, err
		}
		if _, err := eng.SetSchedule(ctx, booking.System, r.ID, booking.ScheduleInput{SlotMinutes: 60, HorizonDays: 3,
			Weekly: []booking.WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: "00:00", Close: "24:00"}}}); err != nil {
			return nil, err
		}
		for j := range loadSlots {
			at := first.Add(time.Duration(j) * time.Hour)
			l.slots = append(l.slots, loadSlot{resource: r.ID, start: at, end: at.Add(time.Hour)})
		}
	}
	return l, nil
}

// resources are the load's resources, which the measurement leaves out of its own counts.
func (l *confirmLoad) resources() []uint64 {
	var out []uint64
	for _, s := range l.slots {
		if !slices.Contains(out, s.resource) {
			out = append(out, s.resource)
		}
	}
	return out
}

// book makes the load's booking number i: a hold, then its confirm, which is timed.
func (l *confirmLoad) book(ctx context.Context, i int) {
	s := l.slots[i%len(l.slots)]
	user := fmt.Sprintf("load-%d", i)
	h, err := l.eng.Hold(ctx, engine.HoldRequest{UserID: user, ResourceID: s.resource, Start: s.start, End: s.end, Quantity: 1})
	var took time.Duration
	if err == nil {
		t := time.Now()
		_, err = l.eng.Confirm(ctx, booking.Actor{UserID: user, Role: booking.RoleUser}, h.ID)
		took = time.Since(t)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.lats = append(l.lats, took)
	case ctx.Err() == nil:
		l.errs++
		if l.firstErr == "" {
			l.firstErr = err.Error()
		}
	}
}

// start runs l (nil: none) from loadLead before first until stop is called, or loadTail after last;
// stop answers what it achieved (nil without a load).
func (l *confirmLoad) start(ctx context.Context, first, last time.Time) (stop func() *LoadStats) {
	if l == nil {
		return func() *LoadStats { return nil }
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan *LoadStats, 1)
	go func() { done <- l.run(ctx, first.Add(-loadLead), last.Add(loadTail)) }()
	return func() *LoadStats {
		cancel()
		return <-done
	}
}

// run books at l.rate from from until ctx ends or until, and answers what it achieved. Bookings
// start on a fixed schedule, whatever the ones before them take (an open loop, as customers do
// not wait for each other), up to loadInFlight at once.
func (l *confirmLoad) run(ctx context.Context, from, until time.Time) *LoadStats {
	if err := loop.Sleep(ctx, time.Until(from)); err != nil {
		return l.stats(from, time.Now())
	}
	start := time.Now()
	ctx, stop := context.WithDeadline(ctx, until)
	defer stop()
	sem := make(chan struct{}, loadInFlight)
	var wg sync.WaitGroup
	step := time.Second / time.Duration(l.rate)
	for i := 0; ; i++ {
		if err := loop.Sleep(ctx, time.Until(start.Add(time.Duration(i)*step))); err != nil {
			break
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		n := int(l.next.Add(1)) - 1
		wg.Go(func() {
			defer func() { <-sem }()
			// A booking under way when the load stops finishes: a customer's payment does.
			l.book(context.WithoutCancel(ctx), n)
		})
	}
	end := time.Now()
	wg.Wait()
	return l.stats(start, end)
}

func (l *confirmLoad) stats(start, end time.Time) *LoadStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := &LoadStats{Path: l.path, TargetPerSecond: float64(l.rate), Seconds: end.Sub(start).Seconds(),
		Confirms: len(l.lats), Errors: l.errs, FirstError: l.firstErr, lats: slices.Clone(l.lats)}
	st.finish()
	return st
}

// LoadStats is what a busy case's confirm load achieved: confirms (hold, then confirm, one unit
// each) per second over the time it ran, the confirms' own latency, and its errors.
type LoadStats struct {
	// Path says through what the load booked.
	Path            string  `json:"path"`
	TargetPerSecond float64 `json:"target_confirms_per_second"`
	Seconds         float64 `json:"seconds"`
	Confirms        int     `json:"confirms"`
	PerSecond       float64 `json:"confirms_per_second"`
	P50Ms           float64 `json:"confirm_p50_ms"`
	P99Ms           float64 `json:"confirm_p99_ms"`
	MaxMs           float64 `json:"confirm_max_ms"`
	Errors          int     `json:"errors"`
	FirstError      string  `json:"first_error,omitempty"`

	lats []time.Duration
}

// finish computes the figures from the latencies (sorting them).
func (s *LoadStats) finish() {
	slices.Sort(s.lats)
	if s.Seconds > 0 {
		s.PerSecond = float64(s.Confirms) / s.Seconds
	}
	s.P50Ms, s.P99Ms = ms(quantile(s.lats, 0.5)), ms(quantile(s.lats, 0.99))
	if len(s.lats) > 0 {
		s.MaxMs = ms(s.lats[len(s.lats)-1])
	}
}

// poolLoads merges the loads of several runs: counts and time add up, latencies are pooled.
func poolLoads(runs []*LoadStats) *LoadStats {
	if len(runs) == 0 || runs[0] == nil {
		return nil
	}
	out := &LoadStats{Path: runs[0].Path, TargetPerSecond: runs[0].TargetPerSecond}
	for _, r := range runs {
		if r == nil {
			continue
		}
		out.Seconds += r.Seconds
		out.Confirms += r.Confirms
		out.Errors += r.Errors
		if out.FirstError == "" {
			out.FirstError = r.FirstError
		}
		out.lats = append(out.lats, r.lats...)
	}
	out.finish()
	return out
}

// startLoadInstance starts a slotwheel instance of its own — a database, key prefix, engine and
// loops, as measureSlotwheel wires them, without a release worker: its bookings fall due hours
// later — to carry a busy case's confirm load beside an anchor. stop ends it and removes its data.
func startLoadInstance(ctx context.Context, env *Env, rate int, seconds time.Duration) (l *confirmLoad, err error) {
	cleanup := context.WithoutCancel(ctx)
	db, err := env.newDatabase(ctx, true)
	if err != nil {
		return nil, err
	}
	prefix := env.prefix() + ":" + randomName("bench-release-load-")
	runCtx, cancel := context.WithCancel(ctx)
	var loops *engine.Loops
	stop := func() error {
		cancel()
		if loops != nil {
			loops.Stop()
		}
		return errors.Join(env.deleteKeys(cleanup, prefix+":*"), db.drop(cleanup))
	}
	eng, err := engine.New(engine.Options{DB: db.gorm, Redis: env.Redis, Prefix: prefix, ReminderLead: -1, Logger: env.logger()})
	if err == nil {
		l, err = newConfirmLoad(ctx, eng, "a slotwheel instance of its own", rate, seconds)
	}
	if err == nil {
		_, err = eng.Reconcile(ctx)
	}
	if err != nil {
		return nil, errors.Join(err, stop())
	}
	loops = eng.NewLoops(engine.LoopsConfig{Lease: eng.Lease})
	loops.Start(runCtx)
	l.closeFn = stop
	return l, nil
}

// Contention is what the measured process waited for while the bookings fell due (from the first
// release_at until all were seen released): connections of the design's own MySQL pool (for
// slotwheel, the instance's, which its API shares), and the CPU — how long goroutines were
// runnable before they ran (the Go scheduler's latency, over the whole process: the instance, the
// load and the watcher).
type Contention struct {
	PoolMaxOpen  int   `json:"pool_max_open"`
	PoolMaxInUse int   `json:"pool_max_in_use"`
	PoolWaits    int64 `json:"pool_waits"`
	// PoolWaitMs is the time requests spent waiting for a connection, summed over them.
	PoolWaitMs float64 `json:"pool_wait_ms"`
	// PoolClosedIdle counts connections closed on their return because the pool already kept its
	// most idle ones (MaxIdle): under a load that needs more, each is a new connection soon after.
	PoolClosedIdle int64   `json:"pool_closed_idle"`
	RunnableP50Ms  float64 `json:"runnable_p50_ms"`
	RunnableP99Ms  float64 `json:"runnable_p99_ms"`
	RunnableMaxMs  float64 `json:"runnable_max_ms"` // the upper bound of the highest bucket reached
}

// contentionWatch samples a pool and the scheduler's latency histogram until stopped.
type contentionWatch struct {
	db       *sql.DB
	before   sql.DBStats
	sched    *metrics.Float64Histogram
	maxInUse atomic.Int64
	stop     func()
	done     chan struct{}
}

const schedLatencies = "/sched/latencies:seconds"

func watchContention(db *sql.DB) *contentionWatch {
	w := &contentionWatch{db: db, before: db.Stats(), sched: readSched(), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	go func() {
		defer close(w.done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if n := int64(w.db.Stats().InUse); n > w.maxInUse.Load() {
				w.maxInUse.Store(n)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// end stops the watch and answers what it saw.
func (w *contentionWatch) end() *Contention {
	w.stop()
	<-w.done
	after := w.db.Stats()
	c := &Contention{PoolMaxOpen: after.MaxOpenConnections, PoolMaxInUse: int(w.maxInUse.Load()),
		PoolWaits: after.WaitCount - w.before.WaitCount, PoolWaitMs: ms(after.WaitDuration - w.before.WaitDuration),
		PoolClosedIdle: after.MaxIdleClosed - w.before.MaxIdleClosed}
	if h := readSched(); h != nil && w.sched != nil {
		c.RunnableP50Ms, c.RunnableP99Ms, c.RunnableMaxMs = histDelta(w.sched, h)
	}
	return c
}

func readSched() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: schedLatencies}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// histDelta is the p50, p99 and highest reached bucket (upper bounds, in ms) of what histogram b
// counted after a.
func histDelta(a, b *metrics.Float64Histogram) (p50, p99, top float64) {
	if len(a.Counts) != len(b.Counts) {
		return 0, 0, 0
	}
	var total uint64
	counts := make([]uint64, len(b.Counts))
	for i := range counts {
		counts[i] = b.Counts[i] - a.Counts[i]
		total += counts[i]
	}
	if total == 0 {
		return 0, 0, 0
	}
	upper := func(i int) float64 {
		v := b.Buckets[i+1]
		if math.IsInf(v, 1) {
			v = b.Buckets[i]
		}
		return v * 1000
	}
	at := func(q float64) float64 {
		rank := uint64(math.Ceil(q * float64(total)))
		var cum uint64
		for i, c := range counts {
			if cum += c; cum >= rank {
				return upper(i)
			}
		}
		return upper(len(counts) - 1)
	}
	for i := len(counts) - 1; i >= 0; i-- {
		if counts[i] > 0 {
			top = upper(i)
			break
		}
	}
	return at(0.5), at(0.99), top
}

// worstContention keeps, of several runs, the worst of each figure.
func worstContention(runs []*Contention) *Contention {
	var out *Contention
	for _, c := range runs {
		if c == nil {
			continue
		}
		if out == nil {
			cp := *c
			out = &cp
			continue
		}
		out.PoolMaxInUse = max(out.PoolMaxInUse, c.PoolMaxInUse)
		out.PoolWaits = max(out.PoolWaits, c.PoolWaits)
		out.PoolWaitMs = max(out.PoolWaitMs, c.PoolWaitMs)
		out.PoolClosedIdle = max(out.PoolClosedIdle, c.PoolClosedIdle)
		out.RunnableP50Ms = max(out.RunnableP50Ms, c.RunnableP50Ms)
		out.RunnableP99Ms = max(out.RunnableP99Ms, c.RunnableP99Ms)
		out.RunnableMaxMs = max(out.RunnableMaxMs, c.RunnableMaxMs)
	}
	return out
}
