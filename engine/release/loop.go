package release

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotwheel/slotwheel/engine/loop"
)

// LoopName names the loop that releases due bookings, its lease and its mark in Redis.
const LoopName = "release_due"

// LoopConfig configures one release loop beside the service's Config.
type LoopConfig struct {
	// Interval, when set, is the loop's tick in place of Config.Interval.
	Interval time.Duration
	// Lease, when set, makes the loop run on one instance at a time (see loop.Config.Lease).
	Lease loop.Lease
}

// Loop is the release loop on this instance, in engine/loop's shape: Start, Stop and RunOnce.
// Releases fall due to the millisecond: the loop looks at SQL at the next release_at it knows of (a
// timer), at least every Config.Refresh, and at once when this process gives a booking a release_at
// sooner than that (Due), so that a booking is released when it falls due and an idle loop costs a
// probe of the due_at index a second. A run of a burst may take seconds. Its lease, renewed at every
// tick, outlives a few ticks, so that release tasks know it is alive (Release).
type Loop struct {
	s *Service
	l *loop.Loop
	r *releaser
}

// NewLoop builds a release loop with its own state; Start runs it.
func (s *Service) NewLoop(c LoopConfig) *Loop {
	if c.Interval <= 0 {
		c.Interval = s.cfg.Interval
	}
	rl := &Loop{s: s, r: newReleaser(s.cfg)}
	rl.l = loop.New(loop.Config{Name: LoopName, Interval: c.Interval, Timeout: s.cfg.RunTimeout,
		LeaseTTL: s.cfg.Takeover, Lease: c.Lease, Logger: s.log}, rl.tick)
	return rl
}

// Name is the loop's name, LoopName.
func (l *Loop) Name() string { return l.l.Name() }

// Start runs the loop until Stop or until ctx ends. In the background, its runs overlap (see
// releaser); RunOnce on a loop not started waits for its run to end.
func (l *Loop) Start(ctx context.Context) {
	l.r.overlap.Store(true)
	l.l.Start(ctx)
}

// Stop ends the loop and waits for its run in progress and for the runs and follow-ups it left at
// work.
func (l *Loop) Stop() {
	l.l.Stop()
	l.r.overlap.Store(false)
	l.r.wg.Wait()
}

// RunOnce runs the loop's work now (for tests and tools).
func (l *Loop) RunOnce(ctx context.Context) error { return l.l.RunOnce(ctx) }

// Due tells the loop of a booking of this process whose release_at is at: when that is sooner than
// the loop's next look at SQL, the loop looks at once.
func (l *Loop) Due(at time.Time) {
	if at.Sub(l.s.p.Clock.Now()) < l.s.cfg.Refresh {
		l.r.wake.Store(true)
		l.l.Kick()
	}
}

// kickAt asks for a run at next, when that is before the loop's next look at SQL anyway (Gap from
// now at the soonest).
func (l *Loop) kickAt(next time.Time) {
	if wait := next.Sub(l.s.p.Clock.Now()); wait < l.s.cfg.Refresh {
		l.l.KickAfter(max(wait, l.s.cfg.Gap))
	}
}

// tick is one tick of the loop.
func (l *Loop) tick(ctx context.Context) error {
	if now := l.s.p.Clock.Now(); !l.r.shouldLook(now) {
		l.r.running()
		// A timer that fired a hair before the release_at it was set for (the clock reads
		// milliseconds) sets itself again rather than leave the booking to the next tick.
		if next := l.r.nextKnown(); !next.IsZero() && next.After(now) {
			l.kickAt(next)
		}
		return nil
	}
	return l.s.loopRun(ctx, l.r, l.kickAt)
}

// releaser is the release loop's state on this instance. Its runs may overlap: once a run has
// locked its bookings, if it is still writing them Config.Stall later (a slow commit, a stalled
// disk), the loop starts the next run, which skips the rows the first holds; up to Config.Overlap
// runs are open at once. So one slow transaction does not hold back every release falling due
// behind it.
type releaser struct {
	cfg       Config
	overlap   atomic.Bool    // whether runs may overlap: only while the loop runs in the background
	batches   chan struct{}  // a token per open batch transaction of its runs (see releaseRun)
	followUps chan struct{}  // a token per batch's follow-ups at work beside the runs (followUp)
	wg        sync.WaitGroup // runs and follow-ups in flight

	mu       sync.Mutex
	open     map[*round]struct{} // at most Config.Overlap
	failed   int                 // runs that failed, and takeovers
	repaired int                 // of those, how many a give-back of recent releases covered
	lastHeld time.Time           // when the loop last ran here (only while holding its lease)

	// What the loop last read of SQL: when, and the earliest undecided release_at then (zero: none).
	// wake asks for a look at the next tick: a booking of this process is due sooner than the next
	// refresh.
	looked, next time.Time
	wake         atomic.Bool
}

func newReleaser(cfg Config) *releaser {
	return &releaser{cfg: cfg, batches: make(chan struct{}, cfg.Overlap), followUps: make(chan struct{}, cfg.Overlap),
		open: map[*round]struct{}{}}
}

// shouldLook reports whether the loop's tick at now looks at SQL: a booking is due by now as far as
// it knows, or it was asked to, or its last look is Config.Refresh old.
func (r *releaser) shouldLook(now time.Time) bool {
	if r.wake.Swap(false) {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.looked.IsZero() || now.Sub(r.looked) >= r.cfg.Refresh || (!r.next.IsZero() && !now.Before(r.next))
}

// nextKnown is the earliest undecided release_at the loop's last look at SQL found; zero: none.
func (r *releaser) nextKnown() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

// nothingDue reports whether, as far as the loop knows, no booking is due at now: its last look found
// none due by then, no run failed or was taken over since (those are repaired first), and no run is
// open beside this one. Then a look at SQL is only a refresh of the next release_at.
func (r *releaser) nothingDue(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.looked.IsZero() && (r.next.IsZero() || r.next.After(now)) && r.failed <= r.repaired && len(r.open) == 1
}

// saw notes a look at SQL at asOf that found next the earliest undecided release_at.
func (r *releaser) saw(asOf, next time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.looked, r.next = asOf, next
}

// round is one open run of the release loop.
type round struct {
	earliest time.Time // the earliest release_at it has locked; zero: none yet
}

// loopRun is one run of the release loop (see round): it returns when the run has ended or, where
// runs may overlap, when it has locked its bookings and is still at work Config.Stall later. When
// Config.Overlap runs are open already it starts none: the loop comes back at its next tick, and
// its lease is renewed meanwhile. kick is told when the next run is wanted: at the earliest
// release_at still undecided (Config.Gap after the last run at the soonest) or, when a run is left
// at work, Config.Gap from now.
func (s *Service) loopRun(ctx context.Context, r *releaser, kick func(next time.Time)) error {
	r.running()
	rd := r.begin()
	if rd == nil {
		return nil
	}
	locked := make(chan struct{}, 1)
	done := make(chan error, 1)
	var detached atomic.Bool // the loop's run returned and left this one at work
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		// The run outlives the loop's run when it is left at work: it has its own bound.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RunTimeout)
		defer cancel()
		next, err := s.round(ctx, r, rd, func() {
			select {
			case locked <- struct{}{}:
			default:
			}
		})
		if err == nil && !next.IsZero() {
			kick(next)
		}
		if err != nil && detached.Load() {
			s.log.Warn("release run left at work failed", "err", err)
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-locked:
	}
	if !r.overlap.Load() {
		return <-done
	}
	t := time.NewTimer(s.cfg.Stall)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		detached.Store(true)
		kick(s.p.Clock.Now())
		return nil
	}
}

// round is one run of the release loop: every due booking is decided (releaseRun), and the loop
// then says, in Redis, up to when bookings are decided with their units back — the earliest
// release_at still undecided, or now, and never past a booking of another run still open — so that
// release tasks of bookings before it finish without reading SQL. A run that takes the loop over,
// or follows a run that failed (its batch may have committed without word, or without its units'
// return), first gives back the units of the last hour's releases (GiveBack only frees what its
// version no longer holds); until that has been done, no run says anything settled. It answers
// when the loop should look next: the earliest undecided release_at, or zero (at its tick) when
// there is none, or when that booking was due as this run looked and it found nothing — another
// run holds it, and a run every Config.Gap would only find nothing again.
func (s *Service) round(ctx context.Context, r *releaser, rd *round, locked func()) (time.Time, error) {
	if r.nothingDue(s.p.Clock.Now()) {
		// Only a refresh: the index says when the next booking falls due, nothing is due before.
		asOf := s.p.Clock.Now()
		next, err := s.p.SQL.NextDue(ctx)
		r.end(rd, err)
		if err != nil {
			return time.Time{}, err
		}
		r.saw(asOf, next)
		if next.IsZero() || next.After(s.p.Clock.Now()) {
			s.markSettled(ctx, r, next, asOf)
			return next, nil
		}
		rd = r.begin() // one fell due after all (a booking another instance made): release it now
		if rd == nil {
			return time.Time{}, nil
		}
	}
	if failed, ok := r.needsRepair(); ok {
		if err := s.giveBackRecentReleases(ctx); err != nil {
			r.end(rd, err)
			return time.Time{}, err
		}
		r.repairedUpTo(failed)
	}
	start := s.p.Clock.Now()
	ids, err := s.releaseRun(ctx, 0, func(earliest time.Time) {
		r.locked(rd, earliest)
		locked()
	}, r.batches, func(followUp func(context.Context)) { r.followUp(ctx, followUp) })
	countFailure(err)
	r.end(rd, err)
	if err != nil {
		return time.Time{}, err
	}
	asOf := s.p.Clock.Now()
	next, err := s.p.SQL.NextDue(ctx)
	if err != nil {
		return time.Time{}, err
	}
	r.saw(asOf, next)
	s.markSettled(ctx, r, next, asOf)
	if len(ids) == 0 && !next.After(start) {
		return time.Time{}, nil
	}
	return next, nil
}

// markSettled says, in Redis, up to when bookings are decided: next (the earliest undecided
// release_at) or, without one, asOf (when SQL showed none) — never past a booking of a run still
// open, and nothing while a failure awaits its repair (settledBefore).
func (s *Service) markSettled(ctx context.Context, r *releaser, next, asOf time.Time) {
	settled := next
	if settled.IsZero() {
		settled = asOf
	}
	if settled, ok := r.settledBefore(settled); ok {
		if err := s.p.Redis.SetSettled(ctx, LoopName, settled, s.cfg.SettledTTL); err != nil {
			// Tasks read their bookings meanwhile; the releases themselves are done.
			s.log.Warn("could not note the releases settled", "err", err)
		}
	}
}

// followUp runs a batch's follow-ups (afterRelease): beside the loop's next runs while it runs in
// the background, so that a waitlist promotion waiting for a connection of the main pool behind
// holds and confirms does not keep the next bookings due from being released; at once otherwise.
// A few run at a time; more wait their turn in the background rather than pile on the pool.
func (r *releaser) followUp(ctx context.Context, f func(context.Context)) {
	if !r.overlap.Load() {
		f(ctx)
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.followUps <- struct{}{}
		defer func() { <-r.followUps }()
		f(context.WithoutCancel(ctx))
	}()
}

// running notes that the loop runs here, which it does only while this instance holds its lease.
// When it has not for Config.Takeover, it has just taken the loop over or starts: that counts as a
// failure, which the next run repairs (see round).
func (r *releaser) running() {
	r.mu.Lock()
	defer r.mu.Unlock()
	// The wall clock, not the injected one: the lease's TTL runs out in Redis's real time, so
	// whether another instance may have taken the loop over meanwhile is a question of real time.
	now := time.Now()
	if r.lastHeld.IsZero() || now.Sub(r.lastHeld) > r.cfg.Takeover {
		r.failed++
	}
	r.lastHeld = now
}

// begin opens a run; nil when Config.Overlap runs are open already.
func (r *releaser) begin() *round {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.open) >= r.cfg.Overlap {
		return nil
	}
	rd := &round{}
	r.open[rd] = struct{}{}
	return rd
}

// locked notes that rd locked bookings due from earliest on: until rd ends, no run says them
// settled, although, once rd commits, SQL no longer shows them due.
func (r *releaser) locked(rd *round, earliest time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rd.earliest.IsZero() || earliest.Before(rd.earliest) {
		rd.earliest = earliest
	}
}

// end closes rd, which failed with err or succeeded.
func (r *releaser) end(rd *round, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.open, rd)
	if err != nil {
		r.failed++
	}
}

// needsRepair reports whether a run failed, or the loop was taken over, since the last give-back
// of the recent releases' units; failed is what a give-back begun now covers.
func (r *releaser) needsRepair() (failed int, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed, r.failed > r.repaired
}

// repairedUpTo notes a give-back of the recent releases that covers failed failures.
func (r *releaser) repairedUpTo(failed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.repaired = max(r.repaired, failed)
}

// settledBefore is what the loop may say settled, given that SQL shows nothing undecided before
// at: at, or earlier if an open run holds bookings due before it; nothing (false) until a failed
// run's or a takeover's give-back has been done.
func (r *releaser) settledBefore(at time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed > r.repaired {
		return time.Time{}, false
	}
	for rd := range r.open {
		if !rd.earliest.IsZero() && rd.earliest.Before(at) {
			at = rd.earliest
		}
	}
	return at, true
}
