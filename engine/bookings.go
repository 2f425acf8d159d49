package engine

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/catalog"
	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/engine/detach"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
)

// Bookings owns a booking after its confirm: reads, cancel, check-in, restore, reschedule, erasure,
// and the timers and units a booking change moves (bookings.go, reschedule.go, erase.go).
type Bookings struct {
	ss     *sqlstore.Store
	rs     *redisstore.Store
	cat    *catalog.Cache
	sched  release.Scheduler
	events *events
	freed  *freedBus // a cancel's or a move's units are announced
	hooks  *testHooks
	clock  clock.Clock
	log    *slog.Logger

	rules             booking.Rules
	releaseHorizon    time.Duration // Options.ReleaseHorizon
	reminderLead      time.Duration // Options.ReminderLead
	confirmStaleAfter time.Duration // Options.ConfirmStaleAfter
	erasureKey        []byte        // Options.ErasureKey

	// timersSoon, set by NewLoops, tells the release and reminder loops of a booking of this process
	// whose release or reminder is due before their next look at SQL.
	timersSoon atomic.Value // func(b *sqlstore.Booking)

	// What bookings use of the other services.
	catalog interface {
		graceFor(ctx context.Context, ri *catalog.ResourceInfo, start time.Time) (time.Duration, error)
		loadDay(ctx context.Context, ri *catalog.ResourceInfo, day string) error
	}
	holds interface {
		refreshFreezes(ctx context.Context, users []string) error
		loadDayField(ctx context.Context, dayField string) error
	}
	payments interface { // a change the capacity ledger refused rebuilds the venue
		rebuildVenueSoon(venueID uint64)
	}
	upkeep interface {
		repairVenue(ctx context.Context, v uint64, rep *ReconcileReport) error
	}
}

// HistoryEntry is one status change of a booking. At is in the venue's zone.
type HistoryEntry struct {
	From, To string
	At       time.Time
	Actor    string
	Reason   string
}

// BookingQuery selects a venue's bookings for the front desk.
type BookingQuery struct {
	VenueID    uint64
	Date       string // venue-local YYYY-MM-DD of the start, optional
	Days       int    // with Date: that many days from it (0: one)
	Search     string // a booking id, check-in code or user id, optional
	Status     string // optional
	ResourceID uint64 // optional
	Cursor     string
	Limit      int
}

// view is a booking as callers see it: in its venue's zone.
func (bs *Bookings) view(ctx context.Context, b *booking.Booking) (booking.Booking, error) {
	vi, err := bs.cat.Venue(ctx, b.VenueID)
	if err != nil {
		return booking.Booking{}, err
	}
	return b.In(vi.Loc), nil
}

// apply runs one guarded change of booking id: decide picks it with a domain method (after checking
// who may), the store writes it onto the version it was decided on, and the engine carries out its
// effects around the commit — units taken before it, units given back, tasks dropped or scheduled
// after it.
func (bs *Bookings) apply(ctx context.Context, id uint64, decide func(b *sqlstore.Booking) (booking.Change, error)) (sqlstore.Booking, booking.Change, error) {
	took := false
	var old release.Ref
	b, c, err := bs.ss.UpdateBooking(ctx, id, func(b *sqlstore.Booking) (booking.Change, error) {
		old = release.Ref{BookingID: b.ID, ReleaseAt: b.ReleaseAt}
		// The change's event is rendered inside the store's transaction, in the venue's zone: the
		// venue must be in the catalog's cache by then (a lookup there could wait for the very
		// connection the transaction holds).
		if _, err := bs.cat.Venue(ctx, b.VenueID); err != nil {
			return booking.Change{}, err
		}
		c, err := decide(b)
		if err != nil || c.None() {
			return c, err
		}
		if c.TakesUnits() && !took {
			// For the change about to be written: a give-back of an earlier change leaves them.
			if err := bs.takeUnits(ctx, b, b.Version+1); err != nil {
				return booking.Change{}, err
			}
			took = true
		}
		bs.setTimers(b, c.At)
		return c, nil
	})
	if err != nil {
		if took {
			// The change did not happen; the units taken for it go back unless the booking occupies
			// them after all (a concurrent change won the race).
			bs.freeIfNotOccupying(ctx, id)
		}
		if errors.Is(err, booking.ErrNotFound) {
			return b, c, booking.ErrNotFound
		}
		return b, c, bs.ledgerRefusal(b.VenueID, err)
	}
	if c.None() {
		return b, c, nil
	}
	countTransition(booking.Transition{From: c.From, To: c.To})
	if c.FreesUnits() {
		bs.giveBack(ctx, &b)
		bs.freed.announce(ctx, freedUnits{resources: []uint64{b.ResourceID}})
	}
	if c.DropTimers && bs.sched != nil {
		if err := bs.sched.CancelRelease(ctx, old); err != nil {
			bs.log.Warn("cancel release task failed; its handler will do nothing", "booking_id", b.ID, "err", err)
		}
	}
	if c.NewReleaseAt {
		bs.scheduleIfDue(ctx, &b)
	}
	if c.From.CountsAsNoShow() != c.To.CountsAsNoShow() {
		// A restore or a late check-in took a no-show back.
		if err := bs.holds.refreshFreezes(ctx, []string{b.UserID}); err != nil {
			bs.log.Warn("refresh no-show freeze failed; reconciliation will", "user_id", b.UserID, "err", err)
		}
	}
	return b, c, nil
}

// ledgerRefusal answers a change of a booking that the capacity ledger refused (err) as the slot
// being full, and has the venue's Redis state rebuilt: Redis let the units be taken, so it is
// behind MySQL. Any other error is answered as it is.
func (bs *Bookings) ledgerRefusal(venueID uint64, err error) error {
	if !errors.Is(err, sqlstore.ErrOverCapacity) {
		return err
	}
	metricConfirms.WithLabelValues("refused").Inc()
	bs.log.Warn("the capacity ledger refused a booking change that Redis allowed; rebuilding the venue from MySQL",
		"venue_id", venueID, "err", err)
	bs.payments.rebuildVenueSoon(venueID)
	return booking.ErrSlotFull
}

// mayRead answers a booking if actor may see it, else ErrNotFound (nobody learns what exists).
func (bs *Bookings) mayRead(ctx context.Context, a booking.Actor, id uint64) (sqlstore.Booking, error) {
	b, err := bs.ss.Booking(ctx, id)
	if err != nil {
		return b, err
	}
	if !a.MaySee(&b.Booking) {
		return b, booking.ErrNotFound
	}
	return b, nil
}

// GetBooking reads a booking. Owner, staff of its venue, or admin; others get ErrNotFound.
func (bs *Bookings) GetBooking(ctx context.Context, a booking.Actor, id uint64) (booking.Booking, error) {
	b, err := bs.mayRead(ctx, a, id)
	if err != nil {
		return booking.Booking{}, err
	}
	return bs.view(ctx, &b.Booking)
}

// History lists a booking's status changes, oldest first. Owner, staff of its venue, or admin.
func (bs *Bookings) History(ctx context.Context, a booking.Actor, id uint64) ([]HistoryEntry, error) {
	b, err := bs.mayRead(ctx, a, id)
	if err != nil {
		return nil, err
	}
	rows, err := bs.ss.History(ctx, id)
	if err != nil {
		return nil, err
	}
	vi, err := bs.cat.Venue(ctx, b.VenueID)
	if err != nil {
		return nil, err
	}
	out := make([]HistoryEntry, len(rows))
	for i, h := range rows {
		out[i] = HistoryEntry{From: h.From, To: h.To, At: h.At.In(vi.Loc), Actor: h.Actor, Reason: h.Reason}
	}
	return out, nil
}

// ListBookings lists bookings newest first: the caller's own (docs/API.md's "mine"; staff included,
// so that a desk account does not see guests' check-in codes), or all for an admin. The cursor is
// opaque to callers.
func (bs *Bookings) ListBookings(ctx context.Context, a booking.Actor, cursor string, limit int) ([]booking.Booking, string, error) {
	q := sqlstore.ListQuery{UserID: a.UserID}
	if a.Role == booking.RoleAdmin {
		q.UserID = ""
	}
	return bs.list(ctx, q, cursor, limit)
}

// VenueBookings lists a venue's bookings for the front desk, newest first, optionally of one
// venue-local day, status or resource. Staff of the venue, or admin.
func (bs *Bookings) VenueBookings(ctx context.Context, a booking.Actor, bq BookingQuery) ([]booking.Booking, string, error) {
	if bq.VenueID == 0 {
		return nil, "", booking.Invalid("missing_venue_id", "venue_id is required").WithField("venue_id")
	}
	if !a.MayListVenue(bq.VenueID) {
		return nil, "", booking.ErrForbidden
	}
	vi, err := bs.cat.Venue(ctx, bq.VenueID)
	if err != nil {
		return nil, "", booking.Unknown(err, "unknown_venue", "venue %d does not exist", bq.VenueID)
	}
	q := sqlstore.ListQuery{VenueID: bq.VenueID, ResourceID: bq.ResourceID, Search: strings.TrimSpace(bq.Search)}
	if bq.Status != "" {
		st, ok := booking.ParseStatus(bq.Status)
		if !ok {
			return nil, "", booking.Invalid("invalid_status", "status %q is not a booking status", bq.Status).WithField("status")
		}
		q.Status = st
	}
	if bq.Date != "" {
		day, err := time.ParseInLocation(booking.DayLayout, bq.Date, vi.Loc)
		if err != nil {
			return nil, "", booking.Invalid("invalid_date", "date must be YYYY-MM-DD").WithField("date")
		}
		days := bq.Days
		if days == 0 {
			days = 1
		}
		if err := booking.CheckRange(booking.FieldDays, int64(days)); err != nil {
			return nil, "", err
		}
		q.From, q.To = day, day.AddDate(0, 0, days)
	} else if bq.Days != 0 {
		return nil, "", booking.Invalid("invalid_days", "days needs a date to count from").WithField("days")
	}
	return bs.list(ctx, q, bq.Cursor, bq.Limit)
}

func (bs *Bookings) list(ctx context.Context, q sqlstore.ListQuery, cursor string, limit int) ([]booking.Booking, string, error) {
	var err error
	if q.Page, err = sqlstore.ParsePage(cursor, limit); err != nil {
		return nil, "", err
	}
	rows, err := bs.ss.ListBookings(ctx, q)
	if err != nil {
		return nil, "", err
	}
	rows, next := sqlstore.NextPage(q.Page, rows, func(b sqlstore.Booking) uint64 { return b.ID })
	out := make([]booking.Booking, 0, len(rows))
	for i := range rows {
		b, err := bs.view(ctx, &rows[i].Booking)
		if err != nil {
			return nil, "", err
		}
		out = append(out, b)
	}
	return out, next, nil
}

// CancelBooking cancels a booking and gives its units back. Owner (CANCELLED_BY_USER) or admin
// (CANCELLED_BY_ADMIN).
func (bs *Bookings) CancelBooking(ctx context.Context, a booking.Actor, id uint64) (booking.Booking, error) {
	b, _, err := bs.apply(ctx, id, func(b *sqlstore.Booking) (booking.Change, error) {
		if !a.MayChange(b.UserID) {
			return booking.Change{}, booking.ErrNotFound
		}
		ri, err := bs.cat.Resource(ctx, b.ResourceID)
		if err != nil {
			return booking.Change{}, err
		}
		return b.Cancel(a, bs.clock.Now(), ri.Policy)
	})
	if err != nil {
		return booking.Booking{}, err
	}
	return bs.view(ctx, &b.Booking)
}

// CheckIn accepts a booking's check-in code. Staff of its venue or admin. A check-in received
// before release_at always wins over the release: if the release got there first, the booking comes
// back (if its units are still free).
func (bs *Bookings) CheckIn(ctx context.Context, a booking.Actor, code string) (booking.Booking, error) {
	if !a.WorksAtAVenue() && a.Role != booking.RoleAdmin {
		return booking.Booking{}, booking.ErrForbidden
	}
	received := bs.clock.Now()
	code = booking.ScannedCheckinCode(code)
	if code == "" || len(code) > booking.MaxCheckinCodeLen {
		return booking.Booking{}, booking.Invalid("invalid_checkin_code", "checkin_code is not a check-in code").WithField("checkin_code")
	}
	id, err := bs.ss.BookingIDByCode(ctx, code)
	if err != nil {
		return booking.Booking{}, err
	}
	var venue uint64
	b, _, err := bs.apply(ctx, id, func(b *sqlstore.Booking) (booking.Change, error) {
		if !a.MayCheckIn(b.VenueID) {
			return booking.Change{}, booking.ErrNotFound
		}
		venue = b.VenueID
		return b.CheckIn(received, a.Name(), bs.rules)
	})
	if err != nil {
		// Out of the transaction: the venue's zone may cost a read of the catalog.
		return booking.Booking{}, booking.DetailsIn(err, bs.cat.Zone(ctx, venue))
	}
	return bs.view(ctx, &b.Booking)
}

// Restore takes a released booking back within the restore window, if its units are still free:
// RELEASED → CONFIRMED with release_at = now + grace and a new release task. Owner or admin.
func (bs *Bookings) Restore(ctx context.Context, a booking.Actor, id uint64) (booking.Booking, error) {
	b, _, err := bs.apply(ctx, id, func(b *sqlstore.Booking) (booking.Change, error) {
		if !a.MayChange(b.UserID) {
			return booking.Change{}, booking.ErrNotFound
		}
		ri, err := bs.cat.Resource(ctx, b.ResourceID)
		if err != nil {
			return booking.Change{}, err
		}
		grace, err := bs.catalog.graceFor(ctx, ri, b.Start)
		if err != nil {
			return booking.Change{}, err
		}
		return b.Restore(bs.clock.Now(), grace, a.Name(), bs.rules)
	})
	if err != nil {
		return booking.Booking{}, err
	}
	return bs.view(ctx, &b.Booking)
}

// NoShows is a user's no-show count: their released bookings (a restore or a late check-in takes
// one back).
func (bs *Bookings) NoShows(ctx context.Context, userID string) (int, error) {
	return bs.ss.NoShows(ctx, userID, time.Time{})
}

// setTimers sets what a booking still needs to be timed after a change: a CONFIRMED booking needs a
// release task (queued by the loader once within the horizon) and, unless it is too late for one,
// a reminder, and its release is to be decided; a PENDING_APPROVAL booking needs the same task at
// its approval deadline (release_at), which declines it unless staff decided first, and no
// reminder; any other status, or a booking whose release was held back, needs none of them.
func (bs *Bookings) setTimers(b *sqlstore.Booking, now time.Time) {
	b.QueueAt, b.DueAt, b.RemindAt = nil, nil, nil
	if (b.Status != booking.Confirmed && b.Status != booking.PendingApproval) || b.ReleaseHeldAt != nil {
		return
	}
	at := b.ReleaseAt
	b.QueueAt, b.DueAt = &at, &at
	if b.Status != booking.Confirmed {
		return
	}
	if r, ok := booking.ReminderAt(b.ReleaseAt, bs.reminderLead, now); ok {
		b.RemindAt = &r
	}
}

// scheduleIfDue tells the loops of the booking's new release_at and reminder (they wake when those
// are sooner than their next look at SQL), and queues the release task when release_at is already
// within the horizon; later ones wait in SQL for the loader.
func (bs *Bookings) scheduleIfDue(ctx context.Context, b *sqlstore.Booking) {
	if soon, ok := bs.timersSoon.Load().(func(*sqlstore.Booking)); ok {
		soon(b)
	}
	if bs.sched == nil || b.ReleaseAt.Sub(bs.clock.Now()) > bs.releaseHorizon {
		return
	}
	ref := release.Ref{BookingID: b.ID, ReleaseAt: b.ReleaseAt}
	if _, err := bs.sched.ScheduleRelease(ctx, ref); err != nil {
		bs.log.Error("schedule release failed; the loader will retry", "booking_id", b.ID, "err", err)
		return
	}
	if err := bs.MarkReleaseQueued(ctx, []release.Ref{ref}); err != nil {
		bs.log.Warn("mark release queued failed", "booking_id", b.ID, "err", err)
	}
}

// DueReleases lists CONFIRMED bookings whose release_at is before until and whose task is not yet
// queued, oldest first.
func (bs *Bookings) DueReleases(ctx context.Context, until time.Time, limit int) ([]release.Ref, error) {
	rs, err := bs.ss.DueForQueue(ctx, until, limit)
	out := make([]release.Ref, len(rs))
	for i, r := range rs {
		out[i] = release.Ref{BookingID: r.BookingID, ReleaseAt: r.ReleaseAt}
	}
	return out, err
}

// MarkReleaseQueued records that the release tasks of refs are in the queue, so the loader stops
// offering them. A booking restored meanwhile (another release_at) stays to be queued.
func (bs *Bookings) MarkReleaseQueued(ctx context.Context, refs []release.Ref) error {
	rs := make([]sqlstore.Ref, len(refs))
	for i, r := range refs {
		rs[i] = sqlstore.Ref{BookingID: r.BookingID, ReleaseAt: r.ReleaseAt}
	}
	return bs.ss.MarkQueued(ctx, rs)
}

// units are the units a booking holds in Redis, as its current version holds them.
func units(b *sqlstore.Booking) redisstore.BookingUnits {
	return redisstore.BookingUnits{BookingID: b.ID, HoldID: b.HoldID, Qty: b.Quantity, Fields: b.Fields, Version: b.Version}
}

// takeUnits takes a booking's units again (restore, check-in after release) for its change at
// version: they must be free.
func (bs *Bookings) takeUnits(ctx context.Context, b *sqlstore.Booking, version int) error {
	ri, err := bs.cat.Resource(ctx, b.ResourceID)
	if err != nil {
		return err
	}
	for _, day := range bookingDays(&b.Booking, ri.Venue.Loc) {
		loaded, err := bs.rs.DayLoaded(ctx, b.VenueID, redisstore.DayField(b.ResourceID, day))
		if err != nil {
			return err
		}
		if !loaded {
			if err := bs.catalog.loadDay(ctx, ri, day); err != nil {
				return err
			}
		}
	}
	u := units(b)
	u.Version = version
	out, err := bs.rs.Restore(ctx, b.VenueID, u)
	if err != nil {
		return err
	}
	if out == "full" || out == "closed" {
		return booking.ErrSlotFull
	}
	return nil
}

// freed names a booking's units as they come back after its change at b.Version.
func freed(b *sqlstore.Booking) redisstore.Freed {
	return redisstore.Freed{Booking: b.ID, Version: b.Version}
}

func bookingDays(b *booking.Booking, loc *time.Location) []string {
	var days []string
	for d := booking.LocalDay(b.OccupyStart, loc); d.Before(b.OccupyEnd); d = d.AddDate(0, 0, 1) {
		days = append(days, d.Format(booking.DayLayout))
	}
	return days
}

// giveBack returns a booking's units after SQL stopped counting them at b.Version (units a later
// change took again stay). Idempotent; a failure is repaired by reconciliation, which frees units
// whose booking no longer occupies.
func (bs *Bookings) giveBack(ctx context.Context, b *sqlstore.Booking) {
	lctx, cancel := detach.Later(ctx)
	defer cancel()
	if _, err := bs.rs.GiveBack(lctx, b.VenueID, []redisstore.Freed{freed(b)}, bs.clock.Now()); err != nil {
		bs.log.Error("give back units failed; reconciliation will", "booking_id", b.ID, "err", err)
	}
}

// freeIfNotOccupying gives a booking's units back unless SQL says it occupies them.
func (bs *Bookings) freeIfNotOccupying(ctx context.Context, id uint64) {
	lctx, cancel := detach.Later(ctx)
	defer cancel()
	b, err := bs.ss.Booking(lctx, id)
	if err != nil {
		bs.log.Warn("could not check units taken for a change that failed; reconciliation will", "booking_id", id, "err", err)
		return
	}
	if !b.Status.Occupies() {
		bs.giveBack(lctx, &b)
	}
}
