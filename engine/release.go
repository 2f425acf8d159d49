package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/loop"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
)

// releaseBatch is how many bookings one transaction releases: slots start on the hour, so no-shows
// fall due together, and one version-guarded UPDATE with bulk history and outbox rows costs about
// what a single release does.
const releaseBatch = 1000

// ReleaseDue decides the release of every CONFIRMED booking of venueID (0: of every venue) whose
// release_at has come, in batches, under each venue's release mode, and answers how many it decided.
// It never releases early: a batch takes only bookings whose release_at is at or before now. Each
// batch's units come back in one script per venue, and the freed resources' first waiters are
// promoted.
func (e *Releases) ReleaseDue(ctx context.Context, venueID uint64) (int, error) {
	ids, err := e.releaseDue(ctx, venueID)
	return len(ids), err
}

// releaseDue is ReleaseDue answering the ids decided. One run per venue key goes on at a time in a
// process; a caller that finds one under way shares its result (see releaseFlight).
func (e *Releases) releaseDue(ctx context.Context, venueID uint64) ([]uint64, error) {
	ch := e.releaseFlight.DoChan(strconv.FormatUint(venueID, 10), func() (any, error) {
		ids, err := e.releaseRun(context.WithoutCancel(ctx), venueID, nil, nil, nil)
		countReleaseFailure(err)
		return ids, err
	})
	select {
	case r := <-ch:
		ids, _ := r.Val.([]uint64)
		return ids, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// releaseRun releases the due bookings of venueID (0: of every venue with one due) in batches of up
// to releaseBatch that mix venues, so that a second in which a hundred venues each have a few
// no-shows costs one transaction, not a hundred. A burst's batches overlap: as soon as one batch has
// locked a full releaseBatch of rows, the next one starts (SKIP LOCKED gives it the rows after
// them), up to releaseOverlap transactions at once, and the next one writes while a batch gives its
// units back and commits. The run returns when every batch it started has finished. locked, when set, is
// told the earliest release_at of each batch whose rows are locked (on MySQL, before it commits);
// open, when set, holds the tokens of open batch transactions that the run shares with others;
// aside, when set, is handed each batch's follow-ups (see afterRelease) instead of the run waiting
// for them.
func (e *Releases) releaseRun(ctx context.Context, venueID uint64, locked func(earliest time.Time), open chan struct{}, aside func(followUp func(context.Context))) ([]uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, releaseRunTimeout)
	defer cancel()
	var venues []uint64 // every venue's
	if venueID != 0 {
		venues = []uint64{venueID}
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		released []uint64
		errs     []error
	)
	size := releaseBatch
	if e.hooks.batchSize > 0 {
		size = e.hooks.batchSize
	}
	if open == nil {
		open = make(chan struct{}, releaseOverlap) // a token per open batch transaction
	}
	var batch func()
	next := func() { wg.Add(1); go batch() }
	batch = func() {
		defer wg.Done()
		open <- struct{}{}
		started := false // whether this batch started its successor (a retried transaction locks again)
		bs, chs, back, err := e.decideBatch(ctx, venues, size, func(n int, earliest time.Time) {
			if e.hooks.batchLocked != nil {
				e.hooks.batchLocked(len(open))
			}
			if locked != nil && n > 0 {
				locked(earliest)
			}
			if n == size && !started {
				started = true
				next()
			}
		})
		<-open
		if err == nil && e.hooks.afterBatchCommit != nil {
			err = e.hooks.afterBatchCommit()
		}
		if err == nil {
			var followUp func(context.Context)
			followUp, err = e.afterRelease(ctx, bs, chs, back)
			if aside != nil {
				aside(followUp)
			} else {
				followUp(ctx)
			}
			if len(bs) == size && !started {
				next() // where rows are not locked per transaction (SQLite), batches follow each other
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for i := range bs {
			released = append(released, bs[i].ID)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	wg.Add(1)
	batch()
	wg.Wait()
	return released, errors.Join(errs...)
}

// releaseOverlap is how many batch transactions of one release run (or of the release loop's
// overlapping runs together) may be open at once: one batch's commit and units' return overlap the
// next one's reads and writes.
const releaseOverlap = 3

// decideBatch decides one batch of up to size due bookings of venues (nil: of every venue), in one
// transaction; locked is told how many rows it locked (see sqlstore.DueQuery). The released units
// are given back before the transaction commits, so that a client who reads RELEASED finds the slot
// bookable; back reports whether they all went back then. Should the commit fail after that, the
// bookings are still CONFIRMED and due — the next run releases them — and the capacity ledger
// refuses a confirm that their units would oversell meanwhile.
func (e *Releases) decideBatch(ctx context.Context, venues []uint64, size int, locked func(n int, earliest time.Time)) (bs []sqlstore.Booking, chs []booking.Change, back bool, err error) {
	var (
		at       time.Time
		modes    map[uint64]booking.ReleaseMode
		policies map[uint64]booking.Policy
		missing  []uint64
	)
	q := sqlstore.DueQuery{Venues: venues, Now: e.clock.Now(), Limit: size, Locked: locked,
		// The modes are read in every batch's transaction, so that a mode change takes effect at
		// once on every instance; the venues' zones (events are rendered in them) and rules come
		// from the catalog's cache. The transaction holds its rows and a connection: it must not
		// wait for another one to load the catalog (check-ins waiting on those rows may hold the
		// rest of the pool), so a venue not cached ends it, and it is tried again once loaded.
		Rules: func(stored map[uint64]string) error {
			modes, policies, missing = e.releaseRules(stored)
			if len(missing) > 0 {
				return errRulesMissing
			}
			return nil
		},
		Written: func(released []sqlstore.Booking, chs []booking.Change) {
			if back = false; e.hooks.earlyGiveBackFails {
				return
			}
			byVenue, _, _ := releasedUnits(released, chs)
			lctx, cancel := later(ctx)
			defer cancel()
			_, gerr := e.giveBackVenues(lctx, byVenue)
			back = gerr == nil
		}}
	decide := func(b *sqlstore.Booking) (booking.Change, error) {
		if at.IsZero() {
			// Taken once the rows are locked, so that released_at (and the lag measured from it) is
			// when the batch decided, not when it began to look; still never early, as the query
			// took only bookings due before it.
			at = e.clock.Now()
		}
		p, ok := policies[b.ResourceID]
		if !ok {
			p = booking.DefaultPolicy()
		}
		c, err := b.Decide(at, modes[b.VenueID], p)
		if err == nil && !c.None() {
			e.bookings.setTimers(b, at)
		}
		return c, err
	}
	bs, chs, err = e.ss.ReleaseDue(ctx, q, decide)
	if !errors.Is(err, errRulesMissing) {
		return bs, chs, back, err
	}
	ctx = sqlstore.OnReleasePath(ctx) // not behind the holds and confirms that may fill the main pool
	for _, v := range missing {
		if err := e.cat.loadReleaseRules(ctx, v); err != nil {
			return nil, nil, false, err
		}
	}
	at = time.Time{}
	bs, chs, err = e.ss.ReleaseDue(ctx, q, decide)
	return bs, chs, back, err
}

// errRulesMissing ends a release batch whose venues' rules are not in the catalog's cache.
var errRulesMissing = errors.New("release rules not cached")

// releaseRunTimeout bounds one release run: a burst of tens of thousands of bookings takes a few
// seconds; a run that takes longer is stuck on the database.
const releaseRunTimeout = time.Minute

// releaseRules is what a batch decides by, given the stored release modes of its venues: each
// venue's mode (the instance's default where none is stored), and the booking rules of their
// resources that have some, from the catalog's cache; missing lists the venues it does not hold.
func (e *Releases) releaseRules(stored map[uint64]string) (modes map[uint64]booking.ReleaseMode, policies map[uint64]booking.Policy, missing []uint64) {
	modes = make(map[uint64]booking.ReleaseMode, len(stored))
	policies = map[uint64]booking.Policy{}
	now := e.clock.Now()
	for v, m := range stored {
		ps, ok := e.cat.cachedReleaseRules(now, v)
		if !ok {
			missing = append(missing, v)
			continue
		}
		mode := e.opts.ReleaseMode
		if m != "" {
			mode = booking.ReleaseMode(m)
		}
		observeMode(v, mode)
		modes[v] = mode
		maps.Copy(policies, ps)
	}
	return modes, policies, missing
}

// afterRelease carries out what a committed batch of releases leaves to do: its units back if the
// batch could not give them back before its commit (back), and metrics. It answers whether every
// unit is back — a run that could not give some back fails, so that the release loop does not say
// them settled (releaseRound) — and the batch's follow-up: announcing the freed resources and the
// owners released as no-shows (announceFreed). The loop runs follow-ups beside its next runs rather
// than before them; what a follow-up lost with its process the sweeps find again.
func (e *Releases) afterRelease(ctx context.Context, bs []sqlstore.Booking, chs []booking.Change, back bool) (followUp func(context.Context), err error) {
	byVenue, resources, users := releasedUnits(bs, chs)
	for i := range bs {
		if c := chs[i]; c.HeldBy != "" {
			metricReleases.WithLabelValues("held_" + string(c.HeldBy)).Inc()
		} else {
			metricReleases.WithLabelValues("released").Inc()
			metricTransitions.WithLabelValues(string(c.From), string(c.To)).Inc()
			metricReleaseLag.Observe(bs[i].ReleasedAt.Sub(bs[i].ReleaseAt).Seconds())
		}
	}
	if len(byVenue) > 0 && !back {
		lctx, cancel := later(ctx)
		defer cancel()
		if _, err = e.giveBackVenues(lctx, byVenue); err != nil {
			e.log.Error("give back released units failed; the release loop's next run will", "err", err)
		}
	}
	return func(ctx context.Context) {
		if len(resources) == 0 {
			return
		}
		lctx, cancel := later(ctx)
		defer cancel()
		e.announceFreed(lctx, freedUnits{resources: resources, noShows: users})
	}, err
}

// releasedUnits gathers what a batch's releases (not those a release mode held back) freed: the
// units of each venue, the resources and the owners.
func releasedUnits(bs []sqlstore.Booking, chs []booking.Change) (byVenue map[uint64][]redisstore.Freed, resources []uint64, users []string) {
	byVenue = map[uint64][]redisstore.Freed{}
	for i := range bs {
		b := &bs[i]
		if chs[i].HeldBy != "" {
			continue
		}
		byVenue[b.VenueID] = append(byVenue[b.VenueID], freed(b))
		if !slices.Contains(users, b.UserID) {
			users = append(users, b.UserID)
		}
		if !slices.Contains(resources, b.ResourceID) {
			resources = append(resources, b.ResourceID)
		}
	}
	return byVenue, resources, users
}

// giveBackVenues gives back the units of each venue's freed owners, one script per venue (per
// thousand), and answers how many gave units back.
func (e *Releases) giveBackVenues(ctx context.Context, byVenue map[uint64][]redisstore.Freed) (int, error) {
	total := 0
	var errs []error
	for v, fs := range byVenue {
		n, err := e.rs.GiveBack(ctx, v, fs, e.clock.Now())
		total += n
		if err != nil {
			errs = append(errs, fmt.Errorf("venue %d, %d bookings: %w", v, len(fs), err))
		}
	}
	metricUnitsRestored.Add(float64(total))
	return total, errors.Join(errs...)
}

// Release is a release task's work: it moves the booking of ref (and, in the same batch, every
// other due booking of its venue) to RELEASED. It never acts before release_at (a *NotDueError says
// how long to wait); a duplicate delivery, a checked-in or cancelled booking, or a ref whose
// release_at was changed by a restore do nothing. The release loop decides bookings as they fall
// due, and says up to when it has (releaseRound): a task whose release_at is before that is
// Settled without reading the booking. While the loop runs (its lease is held) a task whose
// booking has only just fallen due leaves it to the loop until releaserSlack past release_at, so
// that tasks firing together do not each lock the venue's rows, and then acts itself on one the
// loop has left undecided.
func (e *Releases) Release(ctx context.Context, ref ReleaseRef) (ReleaseOutcome, error) {
	if !ref.ReleaseAt.IsZero() && !ref.Retried {
		// A Redis error counts as no word from the loop: the task then reads SQL itself. So does a
		// retried delivery: its first one failed, perhaps after a commit whose units did not come
		// back, and reading the booking gives them back (below).
		held, done := e.settledByLoop(ctx, ref)
		if wait := ref.ReleaseAt.Add(releaserSlack).Sub(e.clock.Now()); !done && held && wait > 0 && wait <= releaserSlack {
			if err := loop.Sleep(ctx, wait); err != nil {
				return "", err
			}
			_, done = e.settledByLoop(ctx, ref)
		}
		if done {
			return Settled, nil
		}
	}
	for attempt := 0; ; attempt++ {
		b, err := e.ss.Booking(ctx, ref.BookingID)
		if errors.Is(err, ErrNotFound) {
			return NotApplicable, nil
		}
		if err != nil {
			return "", err
		}
		if !ref.ReleaseAt.IsZero() && !b.ReleaseAt.Equal(ref.ReleaseAt) {
			return NotApplicable, nil
		}
		if b.ReleaseHeldAt != nil {
			return NotApplicable, nil // the venue's release mode held it back
		}
		switch b.Status {
		case booking.Released:
			if attempt == 0 {
				// A delivery repeated after a crash between the commit and the units' return.
				e.bookings.giveBack(ctx, &b)
			}
			return AlreadyReleased, nil
		case booking.Confirmed:
		default:
			return NotApplicable, nil
		}
		now := e.clock.Now()
		if now.Before(b.ReleaseAt) {
			return "", &NotDueError{Wait: b.ReleaseAt.Sub(now)}
		}
		if attempt >= 40 {
			return "", errors.Join(ErrStorageUnavailable, errors.New("the booking stayed locked by another release"))
		}
		ids, err := e.releaseDue(ctx, b.VenueID)
		if err != nil {
			return "", err
		}
		if slices.Contains(ids, b.ID) {
			if after, err := e.ss.Booking(ctx, b.ID); err == nil && after.Status != booking.Released {
				return NotApplicable, nil // held back by the venue's release mode
			}
			return Released, nil
		}
		// Another instance's batch holds it, or the run began before it fell due: look again.
		if err := loop.Sleep(ctx, 50*time.Millisecond); err != nil {
			return "", err
		}
	}
}

// releaserSlack is how long past release_at a task leaves its booking to the release loop: the
// loop looks at each release_at it knows of and at least every releaseRefresh, and a burst's
// batches take a moment.
const releaserSlack = time.Second

// settledByLoop reads what the release loop says: whether it runs (its lease is held), and whether
// it has decided ref's booking (ref's release_at is before its mark). A Redis error says neither.
func (e *Releases) settledByLoop(ctx context.Context, ref ReleaseRef) (held, done bool) {
	held, settled, err := e.rs.Looper(ctx, releaseLoop)
	if err != nil {
		return false, false
	}
	return held, ref.ReleaseAt.Before(settled)
}

// releaser is the release loop's state on this instance. Its runs may overlap: once a run has
// locked its bookings, if it is still writing them releaseStall later (a slow commit, a stalled
// disk), the loop starts the next run, which skips the rows the first holds; up to releaseOverlap
// runs are open at once. So one slow transaction does not hold back every release falling due
// behind it.
type releaser struct {
	overlap   atomic.Bool    // whether runs may overlap: only while the loop runs in the background
	batches   chan struct{}  // a token per open batch transaction of its runs (see releaseRun)
	followUps chan struct{}  // a token per batch's follow-ups at work beside the runs (followUp)
	wg        sync.WaitGroup // runs and follow-ups in flight

	mu       sync.Mutex
	open     map[*releaseRound]struct{} // at most releaseOverlap
	failed   int                        // runs that failed, and takeovers
	repaired int                        // of those, how many a give-back of recent releases covered
	lastHeld time.Time                  // when the loop last ran here (only while holding its lease)

	// What the loop last read of SQL: when, and the earliest undecided release_at then (zero: none).
	// wake asks for a look at the next tick: a booking of this process is due sooner than the next
	// refresh.
	looked, next time.Time
	wake         atomic.Bool
}

// releaseRefresh bounds how long the release loop goes without looking at SQL: a booking another
// instance makes is seen within it (its release_at is at least its grace away; a release task
// catches one due sooner, after releaserSlack).
const releaseRefresh = time.Second

// shouldLook reports whether the loop's tick at now looks at SQL: a booking is due by now as far as
// it knows, or it was asked to, or its last look is releaseRefresh old.
func (r *releaser) shouldLook(now time.Time) bool {
	if r.wake.Swap(false) {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.looked.IsZero() || now.Sub(r.looked) >= releaseRefresh || (!r.next.IsZero() && !now.Before(r.next))
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

// releaseRound is one open run of the release loop.
type releaseRound struct {
	earliest time.Time // the earliest release_at it has locked; zero: none yet
}

func newReleaser() *releaser {
	return &releaser{batches: make(chan struct{}, releaseOverlap), followUps: make(chan struct{}, releaseOverlap),
		open: map[*releaseRound]struct{}{}}
}

// releaseStall is how long a run of the release loop that has locked its bookings may go on writing
// them before the loop starts the next run beside it; a run usually takes a few milliseconds.
const releaseStall = 10 * time.Millisecond

// releaseTakeover is how long without the release loop running on this instance (holding its
// lease, which lasts a second) means that it has just taken the loop over or starts: the instance
// that ran it before may have died between a batch's commit and its units' return.
const releaseTakeover = time.Second

// releaseSettledTTL is how long the loop's word on what it has settled stands: should the loop stop,
// release tasks go back to reading their bookings.
const releaseSettledTTL = 10 * time.Second

// releaseLoopRun is one run of the release loop (see releaseRound): it returns when the run has
// ended or, where runs may overlap, when it has locked its bookings and is still at work
// releaseStall later. When releaseOverlap runs are open already it starts none: the loop comes
// back at its next tick, and its lease is renewed meanwhile. kick is told when the next run is
// wanted: at the earliest release_at still undecided (releaseGap after the last run at the
// soonest) or, when a run is left at work, releaseGap from now.
func (e *Releases) releaseLoopRun(ctx context.Context, r *releaser, kick func(next time.Time)) error {
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
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseRunTimeout)
		defer cancel()
		next, err := e.releaseRound(ctx, r, rd, func() {
			select {
			case locked <- struct{}{}:
			default:
			}
		})
		if err == nil && !next.IsZero() {
			kick(next)
		}
		if err != nil && detached.Load() {
			e.log.Warn("release run left at work failed", "err", err)
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
	t := time.NewTimer(releaseStall)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		detached.Store(true)
		kick(e.clock.Now())
		return nil
	}
}

// releaseRound is one run of the release loop: every due booking is decided (releaseRun), and the
// loop then says, in Redis, up to when bookings are decided with their units back — the earliest
// release_at still undecided, or now, and never past a booking of another run still open — so that
// release tasks of bookings before it finish without reading SQL. A run that takes the loop over,
// or follows a run that failed (its batch may have committed without word, or without its units'
// return), first gives back the units of the last hour's releases (GiveBack only frees what its
// version no longer holds); until that has been done, no run says anything settled. It answers
// when the loop should look next: the earliest undecided release_at, or zero (at its tick) when
// there is none, or when that booking was due as this run looked and it found nothing — another
// run holds it, and a run every releaseGap would only find nothing again.
func (e *Releases) releaseRound(ctx context.Context, r *releaser, rd *releaseRound, locked func()) (time.Time, error) {
	if r.nothingDue(e.clock.Now()) {
		// Only a refresh: the index says when the next booking falls due, nothing is due before.
		asOf := e.clock.Now()
		next, err := e.ss.NextDue(ctx)
		r.end(rd, err)
		if err != nil {
			return time.Time{}, err
		}
		r.saw(asOf, next)
		if next.IsZero() || next.After(e.clock.Now()) {
			e.markSettled(ctx, r, next, asOf)
			return next, nil
		}
		rd = r.begin() // one fell due after all (a booking another instance made): release it now
		if rd == nil {
			return time.Time{}, nil
		}
	}
	if failed, ok := r.needsRepair(); ok {
		if err := e.giveBackRecentReleases(ctx); err != nil {
			r.end(rd, err)
			return time.Time{}, err
		}
		r.repairedUpTo(failed)
	}
	start := e.clock.Now()
	ids, err := e.releaseRun(ctx, 0, func(earliest time.Time) {
		r.locked(rd, earliest)
		locked()
	}, r.batches, func(followUp func(context.Context)) { r.followUp(ctx, followUp) })
	countReleaseFailure(err)
	r.end(rd, err)
	if err != nil {
		return time.Time{}, err
	}
	asOf := e.clock.Now()
	next, err := e.ss.NextDue(ctx)
	if err != nil {
		return time.Time{}, err
	}
	r.saw(asOf, next)
	e.markSettled(ctx, r, next, asOf)
	if len(ids) == 0 && !next.After(start) {
		return time.Time{}, nil
	}
	return next, nil
}

// markSettled says, in Redis, up to when bookings are decided: next (the earliest undecided
// release_at) or, without one, asOf (when SQL showed none) — never past a booking of a run still
// open, and nothing while a failure awaits its repair (settledBefore).
func (e *Releases) markSettled(ctx context.Context, r *releaser, next, asOf time.Time) {
	settled := next
	if settled.IsZero() {
		settled = asOf
	}
	if settled, ok := r.settledBefore(settled); ok {
		if err := e.rs.SetSettled(ctx, releaseLoop, settled, releaseSettledTTL); err != nil {
			// Tasks read their bookings meanwhile; the releases themselves are done.
			e.log.Warn("could not note the releases settled", "err", err)
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
// When it has not for releaseTakeover, it has just taken the loop over or starts: that counts as a
// failure, which the next run repairs (see releaseRound).
func (r *releaser) running() {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if r.lastHeld.IsZero() || now.Sub(r.lastHeld) > releaseTakeover {
		r.failed++
	}
	r.lastHeld = now
}

// begin opens a run; nil when releaseOverlap runs are open already.
func (r *releaser) begin() *releaseRound {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.open) >= releaseOverlap {
		return nil
	}
	rd := &releaseRound{}
	r.open[rd] = struct{}{}
	return rd
}

// locked notes that rd locked bookings due from earliest on: until rd ends, no run says them
// settled, although, once rd commits, SQL no longer shows them due.
func (r *releaser) locked(rd *releaseRound, earliest time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rd.earliest.IsZero() || earliest.Before(rd.earliest) {
		rd.earliest = earliest
	}
}

// end closes rd, which failed with err or succeeded.
func (r *releaser) end(rd *releaseRound, err error) {
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

// giveBackRecentReleases gives back, once more, the units of the bookings released in the last
// hour (see releaseRound): one read of SQL and one script per venue.
func (e *Releases) giveBackRecentReleases(ctx context.Context) error {
	bs, err := e.ss.RecentlyReleased(ctx, e.clock.Now().Add(-time.Hour))
	if err != nil {
		return err
	}
	byVenue := map[uint64][]redisstore.Freed{}
	for i := range bs {
		byVenue[bs[i].VenueID] = append(byVenue[bs[i].VenueID], freed(&bs[i]))
	}
	n, err := e.giveBackVenues(ctx, byVenue)
	if n > 0 {
		e.log.Warn("gave back units of releases whose return was lost", "bookings", n)
	}
	return err
}

// NeedsRelease reports whether ref's booking still waits for that release: it is CONFIRMED with
// that release_at. A release task of a booking that does not is settled and may be dropped.
func (e *Releases) NeedsRelease(ctx context.Context, ref ReleaseRef) (bool, error) {
	b, err := e.ss.Booking(ctx, ref.BookingID)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return b.DueAt != nil && b.ReleaseAt.Equal(ref.ReleaseAt), nil
}

// observeMode shows a venue's release mode in metrics: 1 for its mode, 0 for the others.
func observeMode(venueID uint64, m booking.ReleaseMode) {
	v := strconv.FormatUint(venueID, 10)
	for _, x := range []booking.ReleaseMode{booking.ReleaseOn, booking.ReleaseOff, booking.ReleaseDryRun} {
		val := 0.0
		if x == m {
			val = 1
		}
		metricReleaseMode.WithLabelValues(v, string(x)).Set(val)
	}
}

// SetReleaseMode sets a venue's release mode; it takes effect at the venue's next release batch, on
// every instance. Admin only.
func (e *Releases) SetReleaseMode(ctx context.Context, a Actor, venueID uint64, mode string) (Venue, error) {
	if err := requireAdmin(a); err != nil {
		return Venue{}, err
	}
	m, err := booking.ParseReleaseMode(mode)
	if err != nil {
		return Venue{}, err
	}
	v, err := e.ss.Venue(ctx, venueID)
	if err != nil {
		return Venue{}, err
	}
	v.ReleaseMode = string(m)
	if err := e.ss.UpdateVenue(ctx, &v, "release_mode"); err != nil {
		return Venue{}, err
	}
	e.cat.venues.forget(venueID)
	observeMode(venueID, m)
	return e.catalog.toVenue(v), nil
}
