package engine

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/internal/redisstore"
	"github.com/slotwheel/slotwheel/engine/internal/sqlstore"
)

// releaseBatch is how many bookings one transaction releases: slots start on the hour, so no-shows
// fall due together, and one version-guarded UPDATE with bulk history and outbox rows costs about
// what a single release does.
const releaseBatch = 1000

// ReleaseDue decides the release of every CONFIRMED booking of venueID (0: of every venue) whose
// release_at has come, in batches, under the venue's release mode, and answers how many it decided. It never releases early: a batch takes only
// bookings whose release_at is at or before now. Each batch's units come back in one script per
// venue, and the freed resources' first waiters are promoted.
func (e *Engine) ReleaseDue(ctx context.Context, venueID uint64) (int, error) {
	ids, err := e.releaseDue(ctx, venueID)
	return len(ids), err
}

func (e *Engine) releaseDue(ctx context.Context, venueID uint64) ([]uint64, error) {
	if venueID == 0 {
		// Venue by venue: each batch's units come back in one script, and its events are rendered
		// in the venue's zone, which must be cached before the transaction starts.
		venues, err := e.ss.DueVenues(ctx, e.clock.Now(), 1000)
		if err != nil {
			return nil, err
		}
		var released []uint64
		var errs []error
		for _, v := range venues {
			ids, err := e.releaseDue(ctx, v)
			released = append(released, ids...)
			errs = append(errs, err)
		}
		return released, errors.Join(errs...)
	}
	if _, err := e.cat.venue(ctx, venueID); err != nil {
		return nil, err
	}
	var released []uint64
	for {
		// Read at every batch, so that a mode change takes effect at once on every instance.
		mode, err := e.releaseMode(ctx, venueID)
		if err != nil {
			return released, err
		}
		policies, err := e.cat.venuePolicies(ctx, venueID)
		if err != nil {
			return released, err
		}
		now := e.clock.Now()
		bs, chs, err := e.ss.ReleaseDue(ctx, sqlstore.DueQuery{VenueID: venueID, Now: now, Limit: releaseBatch},
			func(b *sqlstore.Booking) (booking.Change, error) {
				p, ok := policies[b.ResourceID]
				if !ok {
					p = booking.DefaultPolicy()
				}
				c, err := b.Decide(now, mode, p)
				if err == nil && !c.None() {
					e.setTimers(b, now)
				}
				return c, err
			})
		if err != nil {
			return released, err
		}
		e.afterRelease(ctx, bs, chs)
		for i := range bs {
			released = append(released, bs[i].ID)
		}
		if len(bs) < releaseBatch {
			return released, nil
		}
	}
}

// afterRelease carries out what a committed batch of releases leaves to do: units back (one script
// per venue), waiters promoted, metrics.
func (e *Engine) afterRelease(ctx context.Context, bs []sqlstore.Booking, chs []booking.Change) {
	if len(bs) == 0 {
		return
	}
	byVenue := map[uint64][]redisstore.Freed{}
	var resources []uint64
	var users []string
	for i := range bs {
		b, c := &bs[i], chs[i]
		if c.HeldBy != "" {
			metricReleases.WithLabelValues("held_" + string(c.HeldBy)).Inc()
			continue
		}
		metricReleases.WithLabelValues("released").Inc()
		byVenue[b.VenueID] = append(byVenue[b.VenueID], freed(b))
		if !slices.Contains(users, b.UserID) {
			users = append(users, b.UserID)
		}
		if !slices.Contains(resources, b.ResourceID) {
			resources = append(resources, b.ResourceID)
		}
		metricTransitions.WithLabelValues(string(c.From), string(c.To)).Inc()
		metricReleaseLag.Observe(b.ReleasedAt.Sub(b.ReleaseAt).Seconds())
	}
	lctx, cancel := later(ctx)
	defer cancel()
	for v, fs := range byVenue {
		if _, err := e.rs.GiveBack(lctx, v, fs, e.clock.Now()); err != nil {
			e.log.Error("give back released units failed; reconciliation will", "venue_id", v, "bookings", len(fs), "err", err)
		}
	}
	for _, r := range resources {
		e.promoteAfterFree(lctx, r)
	}
	if err := e.refreshFreezes(lctx, users); err != nil {
		e.log.Warn("refresh no-show freezes failed; reconciliation will", "err", err)
	}
}

// Release is a release task's work: it moves the booking of ref (and, in the same batch, every
// other due booking of its venue) to RELEASED. It never acts before release_at (a *NotDueError says
// how long to wait); a duplicate delivery, a checked-in or cancelled booking, or a ref whose
// release_at was changed by a restore do nothing.
func (e *Engine) Release(ctx context.Context, ref ReleaseRef) (ReleaseOutcome, error) {
	// Another releaser's batch may hold the booking locked (and skipped) for a moment: look again
	// until it is decided, for a bounded time.
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
				e.giveBack(ctx, &b)
			}
			return AlreadyReleased, nil
		case booking.Confirmed:
		default:
			return NotApplicable, nil
		}
		if now := e.clock.Now(); now.Before(b.ReleaseAt) {
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
		if attempt > 0 {
			if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
				return "", err
			}
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// NeedsRelease reports whether ref's booking still waits for that release: it is CONFIRMED with
// that release_at. A release task of a booking that does not is settled and may be dropped.
func (e *Engine) NeedsRelease(ctx context.Context, ref ReleaseRef) (bool, error) {
	b, err := e.ss.Booking(ctx, ref.BookingID)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return b.DueAt != nil && b.ReleaseAt.Equal(ref.ReleaseAt), nil
}

// releaseMode is a venue's release mode, or the deployment's default.
func (e *Engine) releaseMode(ctx context.Context, venueID uint64) (booking.ReleaseMode, error) {
	m, err := e.ss.VenueReleaseMode(ctx, venueID)
	if err != nil {
		return "", err
	}
	mode := e.opts.ReleaseMode
	if m != "" {
		mode = booking.ReleaseMode(m)
	}
	observeMode(venueID, mode)
	return mode, nil
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
func (e *Engine) SetReleaseMode(ctx context.Context, a Actor, venueID uint64, mode string) (Venue, error) {
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
	return e.toVenue(v), nil
}
