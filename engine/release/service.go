package release

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/detach"
	"github.com/slotwheel/slotwheel/engine/loop"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
)

// Service releases no-shows: the release runs (ReleaseDue), a task's release (Release) and the
// release loop (NewLoop). It is safe for concurrent use.
type Service struct {
	cfg   Config
	hooks *Hooks
	p     Ports
	log   *slog.Logger
	// flight lets one release run per venue key go on at a time in this process: release tasks of
	// one venue fire together, and each starting a SELECT … FOR UPDATE SKIP LOCKED of its own
	// starves the batch that holds the rows (and swells InnoDB's lock memory).
	flight singleflight.Group
}

// New builds the release service on its ports.
func New(cfg Config, p Ports) *Service {
	cfg = cfg.withDefaults()
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	return &Service{cfg: cfg, hooks: cfg.Hooks, p: p, log: p.Logger}
}

// Config is the service's configuration, defaults applied.
func (s *Service) Config() Config { return s.cfg }

// ReleaseDue decides the release of every CONFIRMED booking of venueID (0: of every venue) whose
// release_at has come, in batches, under each venue's release mode, and answers how many it decided.
// It never releases early: a batch takes only bookings whose release_at is at or before now. Each
// batch's units come back in one script per venue, and the freed resources are announced.
func (s *Service) ReleaseDue(ctx context.Context, venueID uint64) (int, error) {
	ids, err := s.releaseDue(ctx, venueID)
	return len(ids), err
}

// releaseDue is ReleaseDue answering the ids decided. One run per venue key goes on at a time in a
// process; a caller that finds one under way shares its result (see flight).
func (s *Service) releaseDue(ctx context.Context, venueID uint64) ([]uint64, error) {
	ch := s.flight.DoChan(strconv.FormatUint(venueID, 10), func() (any, error) {
		ids, err := s.releaseRun(context.WithoutCancel(ctx), venueID, nil, nil, nil)
		countFailure(err)
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
// to BatchSize that mix venues, so that a second in which a hundred venues each have a few no-shows
// costs one transaction, not a hundred. A burst's batches overlap: as soon as one batch has locked a
// full BatchSize of rows, the next one starts (SKIP LOCKED gives it the rows after them), up to
// Overlap transactions at once, and the next one writes while a batch gives its units back and
// commits. The run returns when every batch it started has finished. locked, when set, is told the
// earliest release_at of each batch whose rows are locked (on MySQL, before it commits); open, when
// set, holds the tokens of open batch transactions that the run shares with others; aside, when
// set, is handed each batch's follow-ups (see afterRelease) instead of the run waiting for them.
func (s *Service) releaseRun(ctx context.Context, venueID uint64, locked func(earliest time.Time), open chan struct{}, aside func(followUp func(context.Context))) ([]uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RunTimeout)
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
	size := s.cfg.BatchSize
	if s.hooks.BatchSize > 0 {
		size = s.hooks.BatchSize
	}
	if open == nil {
		open = make(chan struct{}, s.cfg.Overlap) // a token per open batch transaction
	}
	var batch func()
	next := func() { wg.Add(1); go batch() }
	batch = func() {
		defer wg.Done()
		open <- struct{}{}
		started := false // whether this batch started its successor (a retried transaction locks again)
		bs, chs, back, err := s.decideBatch(ctx, venues, size, func(n int, earliest time.Time) {
			if s.hooks.BatchLocked != nil {
				s.hooks.BatchLocked(len(open))
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
		if err == nil && len(bs) > 0 && s.hooks.AfterBatchCommit != nil {
			err = s.hooks.AfterBatchCommit()
		}
		if err == nil {
			var followUp func(context.Context)
			followUp, err = s.afterRelease(ctx, bs, chs, back)
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

// decideBatch decides one batch of up to size due bookings of venues (nil: of every venue), in one
// transaction; locked is told how many rows it locked (see sqlstore.DueQuery). The released units
// are given back before the transaction commits, so that a client who reads RELEASED finds the slot
// bookable; back reports whether they all went back then. Should the commit fail after that, the
// bookings are still CONFIRMED and due — the next run releases them — and the capacity ledger
// refuses a confirm that their units would oversell meanwhile.
func (s *Service) decideBatch(ctx context.Context, venues []uint64, size int, locked func(n int, earliest time.Time)) (bs []sqlstore.Booking, chs []booking.Change, back bool, err error) {
	var (
		at       time.Time
		modes    map[uint64]booking.ReleaseMode
		policies map[uint64]booking.Policy
		missing  []uint64
	)
	q := sqlstore.DueQuery{Venues: venues, Now: s.p.Clock.Now(), Limit: size, Locked: locked,
		// The modes are read in every batch's transaction, so that a mode change takes effect at
		// once on every instance; the venues' zones (events are rendered in them) and rules come
		// from the catalog's cache. The transaction holds its rows and a connection: it must not
		// wait for another one to load the catalog (check-ins waiting on those rows may hold the
		// rest of the pool), so a venue not cached ends it, and it is tried again once loaded.
		Rules: func(stored map[uint64]string) error {
			modes, policies, missing = s.releaseRules(stored)
			if len(missing) > 0 {
				return errRulesMissing
			}
			return nil
		},
		Written: func(released []sqlstore.Booking, chs []booking.Change) {
			if back = false; s.hooks.EarlyGiveBackFails {
				return
			}
			byVenue, _, _ := releasedUnits(released, chs)
			lctx, cancel := detach.Later(ctx)
			defer cancel()
			_, gerr := s.giveBackVenues(lctx, byVenue)
			back = gerr == nil
		}}
	decide := func(b *sqlstore.Booking) (booking.Change, error) {
		if at.IsZero() {
			// Taken once the rows are locked, so that released_at (and the lag measured from it) is
			// when the batch decided, not when it began to look; still never early, as the query
			// took only bookings due before it.
			at = s.p.Clock.Now()
		}
		p, ok := policies[b.ResourceID]
		if !ok {
			p = booking.DefaultPolicy()
		}
		c, err := b.Decide(at, modes[b.VenueID], p)
		if err == nil && !c.None() {
			s.p.SetTimers(b, at)
		}
		return c, err
	}
	bs, chs, err = s.p.SQL.ReleaseDue(ctx, q, decide)
	if !errors.Is(err, errRulesMissing) {
		return bs, chs, back, err
	}
	ctx = sqlstore.OnReleasePath(ctx) // not behind the holds and confirms that may fill the main pool
	for _, v := range missing {
		if err := s.p.Rules.LoadReleaseRules(ctx, v); err != nil {
			return nil, nil, false, err
		}
	}
	at = time.Time{}
	bs, chs, err = s.p.SQL.ReleaseDue(ctx, q, decide)
	return bs, chs, back, err
}

// errRulesMissing ends a release batch whose venues' rules are not in the catalog's cache.
var errRulesMissing = errors.New("release rules not cached")

// releaseRules is what a batch decides by, given the stored release modes of its venues: each
// venue's mode (Config.DefaultMode where none is stored), and the booking rules of their resources
// that have some, from the catalog's cache; missing lists the venues it does not hold.
func (s *Service) releaseRules(stored map[uint64]string) (modes map[uint64]booking.ReleaseMode, policies map[uint64]booking.Policy, missing []uint64) {
	modes = make(map[uint64]booking.ReleaseMode, len(stored))
	policies = map[uint64]booking.Policy{}
	now := s.p.Clock.Now()
	for v, m := range stored {
		ps, ok := s.p.Rules.CachedReleaseRules(now, v)
		if !ok {
			missing = append(missing, v)
			continue
		}
		mode := s.cfg.DefaultMode
		if m != "" {
			mode = booking.ReleaseMode(m)
		}
		ObserveMode(v, mode)
		modes[v] = mode
		maps.Copy(policies, ps)
	}
	return modes, policies, missing
}

// afterRelease carries out what a committed batch of releases leaves to do: its units back if the
// batch could not give them back before its commit (back), and metrics. It answers whether every
// unit is back — a run that could not give some back fails, so that the release loop does not say
// them settled (round) — and the batch's follow-up: announcing the freed resources and the owners
// released as no-shows (Ports.Announce). The loop runs follow-ups beside its next runs rather than
// before them; what a follow-up lost with its process the sweeps find again.
func (s *Service) afterRelease(ctx context.Context, bs []sqlstore.Booking, chs []booking.Change, back bool) (followUp func(context.Context), err error) {
	byVenue, resources, users := releasedUnits(bs, chs)
	for i := range bs {
		switch c := chs[i]; {
		case c.HeldBy != "":
			metricReleases.WithLabelValues("held_" + string(c.HeldBy)).Inc()
		case c.To == booking.Declined:
			// An approval deadline the same timer decided: not a no-show release, so not counted as one.
			s.p.CountTransition(booking.Transition{From: c.From, To: c.To})
		default:
			metricReleases.WithLabelValues("released").Inc()
			s.p.CountTransition(booking.Transition{From: c.From, To: c.To})
			metricLag.Observe(bs[i].ReleasedAt.Sub(bs[i].ReleaseAt).Seconds())
		}
	}
	if len(byVenue) > 0 && !back {
		lctx, cancel := detach.Later(ctx)
		defer cancel()
		if _, err = s.giveBackVenues(lctx, byVenue); err != nil {
			s.log.Error("give back released units failed; the release loop's next run will", "err", err)
		}
	}
	return func(ctx context.Context) {
		if len(resources) == 0 {
			return
		}
		lctx, cancel := detach.Later(ctx)
		defer cancel()
		s.p.Announce(lctx, resources, users)
	}, err
}

// releasedUnits gathers what a batch's releases (not those a release mode held back) and approval
// deadlines freed: the units of each venue, the resources, and the owners released as no-shows.
func releasedUnits(bs []sqlstore.Booking, chs []booking.Change) (byVenue map[uint64][]redisstore.Freed, resources []uint64, users []string) {
	byVenue = map[uint64][]redisstore.Freed{}
	for i := range bs {
		b := &bs[i]
		if chs[i].HeldBy != "" {
			continue
		}
		byVenue[b.VenueID] = append(byVenue[b.VenueID], freed(b))
		if chs[i].To.CountsAsNoShow() && !slices.Contains(users, b.UserID) {
			users = append(users, b.UserID)
		}
		if !slices.Contains(resources, b.ResourceID) {
			resources = append(resources, b.ResourceID)
		}
	}
	return byVenue, resources, users
}

// freed names a booking's units as they come back after its change at b.Version.
func freed(b *sqlstore.Booking) redisstore.Freed {
	return redisstore.Freed{Booking: b.ID, Version: b.Version}
}

// giveBackVenues gives back the units of each venue's freed owners, one script per venue (per
// thousand), and answers how many gave units back.
func (s *Service) giveBackVenues(ctx context.Context, byVenue map[uint64][]redisstore.Freed) (int, error) {
	total := 0
	var errs []error
	for v, fs := range byVenue {
		n, err := s.p.Redis.GiveBack(ctx, v, fs, s.p.Clock.Now())
		total += n
		if err != nil {
			errs = append(errs, fmt.Errorf("venue %d, %d bookings: %w", v, len(fs), err))
		}
	}
	metricUnitsRestored.Add(float64(total))
	return total, errors.Join(errs...)
}

// giveBack returns a released booking's units once more (a delivery repeated after a crash between
// the commit and the units' return); units a later change took again stay. A failure is repaired by
// reconciliation, which frees units whose booking no longer occupies.
func (s *Service) giveBack(ctx context.Context, b *sqlstore.Booking) {
	lctx, cancel := detach.Later(ctx)
	defer cancel()
	if _, err := s.giveBackVenues(lctx, map[uint64][]redisstore.Freed{b.VenueID: {freed(b)}}); err != nil {
		s.log.Error("give back units failed; reconciliation will", "booking_id", b.ID, "err", err)
	}
}

// Release is a release task's work: it moves the booking of ref (and, in the same batch, every
// other due booking of its venue) to RELEASED. It never acts before release_at (a
// *booking.NotDueError says how long to wait); a duplicate delivery, a checked-in or cancelled
// booking, or a ref whose release_at was changed by a restore do nothing. The release loop decides
// bookings as they fall due, and says up to when it has (round): a task whose release_at is before
// that is Settled without reading the booking. While the loop runs (its lease is held) a task whose
// booking has only just fallen due leaves it to the loop until Slack past release_at, so that tasks
// firing together do not each lock the venue's rows, and then acts itself on one the loop has left
// undecided.
func (s *Service) Release(ctx context.Context, ref Ref) (Outcome, error) {
	if !ref.ReleaseAt.IsZero() && !ref.Retried {
		// A Redis error counts as no word from the loop: the task then reads SQL itself. So does a
		// retried delivery: its first one failed, perhaps after a commit whose units did not come
		// back, and reading the booking gives them back (below).
		held, done := s.settledByLoop(ctx, ref)
		if wait := ref.ReleaseAt.Add(s.cfg.Slack).Sub(s.p.Clock.Now()); !done && held && wait > 0 && wait <= s.cfg.Slack {
			if err := loop.Sleep(ctx, wait); err != nil {
				return "", err
			}
			_, done = s.settledByLoop(ctx, ref)
		}
		if done {
			return Settled, nil
		}
	}
	for attempt := 0; ; attempt++ {
		b, err := s.p.SQL.Booking(ctx, ref.BookingID)
		if errors.Is(err, booking.ErrNotFound) {
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
				s.giveBack(ctx, &b)
			}
			return AlreadyReleased, nil
		case booking.Confirmed, booking.PendingApproval: // released, or declined at its deadline
		default:
			return NotApplicable, nil
		}
		now := s.p.Clock.Now()
		if now.Before(b.ReleaseAt) {
			return "", &booking.NotDueError{Wait: b.ReleaseAt.Sub(now)}
		}
		if attempt >= 40 {
			return "", errors.Join(booking.ErrStorageUnavailable, errors.New("the booking stayed locked by another release"))
		}
		ids, err := s.releaseDue(ctx, b.VenueID)
		if err != nil {
			return "", err
		}
		if slices.Contains(ids, b.ID) {
			if after, err := s.p.SQL.Booking(ctx, b.ID); err == nil && after.Status != booking.Released && after.Status != booking.Declined {
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

// settledByLoop reads what the release loop says: whether it runs (its lease is held), and whether
// it has decided ref's booking (ref's release_at is before its mark). A Redis error says neither.
func (s *Service) settledByLoop(ctx context.Context, ref Ref) (held, done bool) {
	held, settled, err := s.p.Redis.Looper(ctx, LoopName)
	if err != nil {
		return false, false
	}
	return held, ref.ReleaseAt.Before(settled)
}

// NeedsRelease reports whether ref's booking still waits for that release: it is CONFIRMED with
// that release_at. A release task of a booking that does not is settled and may be dropped.
func (s *Service) NeedsRelease(ctx context.Context, ref Ref) (bool, error) {
	b, err := s.p.SQL.Booking(ctx, ref.BookingID)
	if errors.Is(err, booking.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return b.DueAt != nil && b.ReleaseAt.Equal(ref.ReleaseAt), nil
}

// giveBackRecentReleases gives back, once more, the units of the bookings released in the last
// hour (see round): one read of SQL and one script per venue.
func (s *Service) giveBackRecentReleases(ctx context.Context) error {
	bs, err := s.p.SQL.RecentlyReleased(ctx, s.p.Clock.Now().Add(-time.Hour))
	if err != nil {
		return err
	}
	byVenue := map[uint64][]redisstore.Freed{}
	for i := range bs {
		byVenue[bs[i].VenueID] = append(byVenue[bs[i].VenueID], freed(&bs[i]))
	}
	n, err := s.giveBackVenues(ctx, byVenue)
	if n > 0 {
		s.log.Warn("gave back units of releases whose return was lost", "bookings", n)
	}
	return err
}
