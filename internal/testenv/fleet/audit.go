package fleet

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/redisstore"
)

// wheelSlack is how long past its deadline a hold may still be counted in Redis before Audit calls
// it a leak: the wheel looks every 100 ms, and a dead wheel's lease passes on within a second.
const wheelSlack = 2 * time.Second

// Audit checks docs/DESIGN.md's invariants on what MySQL and Redis hold now, and returns every
// violation it finds (nil when there is none):
//
//   - every booking a 2xx answer confirmed (Confirmed) is in MySQL, for its hold;
//   - no oversell: per slot, the units of occupying bookings (MySQL) and live holds (Redis) stay
//     within the slot's capacity in MySQL, and Redis' counter stays within Redis' capacity;
//   - Redis' counters equal the sum of their owners' units, and its capacities MySQL's;
//   - no leak and nothing uncounted: on the days Redis has loaded, each occupying booking owns its
//     units in Redis (or its confirming hold does), no booking that stopped occupying still owns
//     any, and no hold owns any more than wheelSlack past its deadline;
//   - MySQL's capacity ledger (slot_inventories.occupied) counts, per slot, the units of its
//     occupying bookings;
//   - releases: a booking is RELEASED only from CONFIRMED, once per time it was CONFIRMED, never
//     before its release_at; and every CONFIRMED booking of a venue that releases, not checked in,
//     whose release_at is more than ReleaseSlack ago, is RELEASED.
//
// It reads MySQL in one snapshot, then Redis venue by venue, with no snapshot of both: call it when
// no request is in flight, and retry (AwaitAudit) where background work (a release, an expiry) may
// be under way.
func (f *Fleet) Audit(ctx context.Context) error {
	r, err := f.Inspect(ctx)
	if err != nil {
		return err
	}
	return r.Err()
}

// Report is what one Audit found, counted: a fault suite prints it as a table. Err is the error
// Audit returns.
type Report struct {
	At            time.Time // when the audit began
	Bookings      int       // bookings in MySQL
	Confirmed     int       // bookings a 2xx answer confirmed (the ledger)
	LostConfirms  int       // of those, missing from MySQL or there for another hold
	Due           int       // bookings released at least once, or still CONFIRMED (not checked in) past ReleaseSlack
	Released      int       // bookings released at least once
	Unreleased    int       // bookings still CONFIRMED more than ReleaseSlack past their release_at
	ReleasedTwice int       // bookings released more often than they were CONFIRMED
	Early         int       // bookings released before their release_at
	OversoldSlots int       // slots whose units taken exceed their capacity, in MySQL's account or Redis
	OverCapacity  int       // of those, slots whose occupying bookings alone (MySQL) take more units than they have
	LedgerDrift   int       // slots whose capacity-ledger count differs from their occupying bookings' units
	LeakedUnits   int       // slot units Redis counts for no owner, or for an owner that no longer occupies
	// Releases are every booking's release times, for a test to judge lateness against its faults.
	Releases   []BookingRelease
	Violations []string // every violation, one line each, sorted
}

// BookingRelease is one booking's due time and first release.
type BookingRelease struct {
	BookingID  uint64
	ResourceID uint64
	Status     string
	ReleaseAt  time.Time
	Released   time.Time // of its first release; zero if it never was
	CheckedIn  bool
}

// Err is the violations as Audit's error; nil when there is none.
func (r *Report) Err() error {
	if len(r.Violations) == 0 {
		return nil
	}
	shown := r.Violations[:min(len(r.Violations), maxShown)]
	more := ""
	if len(r.Violations) > maxShown {
		more = fmt.Sprintf("\n  … and %d more", len(r.Violations)-maxShown)
	}
	return errors.New("audit: " + strconv.Itoa(len(r.Violations)) + " violations:\n  " + strings.Join(shown, "\n  ") + more)
}

// Inspect is Audit's check with its findings counted; the error is a failure to read MySQL or
// Redis, not a violation.
func (f *Fleet) Inspect(ctx context.Context) (*Report, error) {
	now := time.Now()
	a := &audit{r: &Report{At: now}}
	db, err := readDB(ctx, f.db)
	if err != nil {
		return nil, err
	}
	a.r.Bookings = len(db.bookings)
	byID := make(map[uint64]*auditBooking, len(db.bookings))
	byHold := make(map[string]*auditBooking, len(db.bookings))
	for i := range db.bookings {
		b := &db.bookings[i]
		byID[b.id], byHold[b.holdID] = b, b
	}

	ledger := f.Confirmed()
	a.r.Confirmed = len(ledger)
	for _, c := range ledger {
		id, _ := strconv.ParseUint(c.BookingID, 10, 64)
		b, ok := byID[id]
		if !ok || b.holdID != c.HoldID {
			a.r.LostConfirms++
		}
		switch {
		case !ok:
			a.add("booking %s was confirmed by %s (hold %s) but is not in MySQL", c.BookingID, c.Via, c.HoldID)
		case b.holdID != c.HoldID:
			a.add("booking %s was confirmed for hold %s but MySQL has it for hold %s", c.BookingID, c.HoldID, b.holdID)
		}
	}

	// Units per slot field: MySQL's bookings now, live holds from Redis below.
	occupied := map[string]int{}
	for _, b := range db.bookings {
		if b.status.Occupies() {
			for _, fl := range b.fields {
				occupied[fl] += b.qty
			}
		}
	}
	// MySQL alone: the bookings against the slots' capacity, and the ledger that counts them.
	for fl, n := range occupied {
		if c, ok := db.capacity[fl]; ok && n > c {
			a.r.OverCapacity++
		}
	}
	for fl, l := range db.ledger {
		if l != occupied[fl] {
			a.r.LedgerDrift++
			a.add("slot %s: the capacity ledger counts %d units, its occupying bookings take %d", fl, l, occupied[fl])
		}
	}
	for _, v := range db.venues {
		st, err := f.store.ReadVenueState(ctx, v.id)
		if err != nil {
			return nil, err
		}
		a.venue(v, st, db, byID, byHold, occupied, now)
	}
	for fl, n := range occupied {
		if c, ok := db.capacity[fl]; !ok && n > 0 {
			a.oversold(fl)
			a.add("slot %s: %d units taken of a slot MySQL does not have", fl, n)
		} else if n > c {
			a.oversold(fl)
			a.add("slot %s: oversold in MySQL's account: %d units of bookings and live holds, capacity %d", fl, n, c)
		}
	}
	a.releases(db, f.releaseMode(), now.Add(-f.opts.ReleaseSlack))
	slices.Sort(a.found)
	a.r.Violations = a.found
	a.r.OversoldSlots = len(a.oversoldSlots)
	return a.r, nil
}

// AwaitAudit runs Audit until it passes or within has passed, and returns the last violations.
// It polls: background work has no event to wait on.
func (f *Fleet) AwaitAudit(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := f.Audit(ctx)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// releaseMode is the instances' SLOTWHEEL_RELEASE_MODE (on unless the fleet's settings say).
func (f *Fleet) releaseMode() string {
	mode := "on"
	for _, kv := range f.opts.Env {
		if v, ok := strings.CutPrefix(kv, "SLOTWHEEL_RELEASE_MODE="); ok && v != "" {
			mode = v
		}
	}
	return mode
}

type auditVenue struct {
	id          uint64
	loc         *time.Location
	releaseMode string
}

type auditBooking struct {
	id, venueID, resourceID uint64
	holdID                  string
	status                  booking.Status
	qty                     int
	fields                  []string
	releaseAt               time.Time
	releasedAt, checkedInAt sql.NullTime
}

type auditTransition struct {
	bookingID uint64
	from, to  booking.Status
	at        time.Time
}

type auditDB struct {
	venues   []auditVenue
	venue    map[uint64]auditVenue
	capacity map[string]int
	ledger   map[string]int // slot_inventories.occupied
	bookings []auditBooking
	history  []auditTransition
}

// readDB reads what the audit needs of MySQL in one read-only REPEATABLE READ transaction, so that
// its tables agree with each other (a release that commits meanwhile is seen in all or none).
func readDB(ctx context.Context, pool *sql.DB) (*auditDB, error) {
	db, err := pool.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("audit: begin: %w", err)
	}
	defer func() { _ = db.Rollback() }()
	out := &auditDB{venue: map[uint64]auditVenue{}, capacity: map[string]int{}, ledger: map[string]int{}}
	rows, err := db.QueryContext(ctx, "SELECT id, timezone, release_mode FROM venues WHERE id IN (SELECT venue_id FROM resources)")
	if err != nil {
		return nil, fmt.Errorf("audit: venues: %w", err)
	}
	err = scanAll(rows, func() error {
		var v auditVenue
		var tz string
		if err := rows.Scan(&v.id, &tz, &v.releaseMode); err != nil {
			return err
		}
		loc, err := time.LoadLocation(tz)
		if err != nil {
			return err
		}
		v.loc = loc
		out.venues = append(out.venues, v)
		out.venue[v.id] = v
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("audit: venues: %w", err)
	}
	if rows, err = db.QueryContext(ctx, "SELECT resource_id, start, capacity, occupied FROM slot_inventories"); err != nil {
		return nil, fmt.Errorf("audit: inventory: %w", err)
	}
	err = scanAll(rows, func() error {
		var res uint64
		var start time.Time
		var c, occupied int
		if err := rows.Scan(&res, &start, &c, &occupied); err != nil {
			return err
		}
		fl := redisstore.SlotField(res, start.Unix()/60)
		out.capacity[fl], out.ledger[fl] = c, occupied
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("audit: inventory: %w", err)
	}
	if rows, err = db.QueryContext(ctx, "SELECT id, hold_id, venue_id, resource_id, status, quantity, slots, release_at, released_at, checked_in_at FROM bookings"); err != nil {
		return nil, fmt.Errorf("audit: bookings: %w", err)
	}
	err = scanAll(rows, func() error {
		var b auditBooking
		var slots string
		if err := rows.Scan(&b.id, &b.holdID, &b.venueID, &b.resourceID, &b.status, &b.qty, &slots, &b.releaseAt, &b.releasedAt, &b.checkedInAt); err != nil {
			return err
		}
		if slots != "" {
			b.fields = strings.Split(slots, ",")
		}
		out.bookings = append(out.bookings, b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("audit: bookings: %w", err)
	}
	if rows, err = db.QueryContext(ctx, "SELECT booking_id, from_status, to_status, at FROM booking_status_history WHERE from_status = ? OR to_status = ? ORDER BY booking_id, version, id",
		string(booking.Released), string(booking.Released)); err != nil {
		return nil, fmt.Errorf("audit: history: %w", err)
	}
	err = scanAll(rows, func() error {
		var h auditTransition
		if err := rows.Scan(&h.bookingID, &h.from, &h.to, &h.at); err != nil {
			return err
		}
		out.history = append(out.history, h)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("audit: history: %w", err)
	}
	return out, nil
}

func scanAll(rows *sql.Rows, scan func() error) error {
	defer rows.Close()
	for rows.Next() {
		if err := scan(); err != nil {
			return err
		}
	}
	return rows.Err()
}

// audit collects violations, and counts them in its report.
type audit struct {
	found         []string
	r             *Report
	oversoldSlots map[string]bool
}

// oversold counts a slot as oversold (once, whether MySQL's account, Redis or both say so).
func (a *audit) oversold(field string) {
	if a.oversoldSlots == nil {
		a.oversoldSlots = map[string]bool{}
	}
	a.oversoldSlots[field] = true
}

// maxShown bounds the violations one error lists.
const maxShown = 25

func (a *audit) add(format string, args ...any) {
	a.found = append(a.found, fmt.Sprintf(format, args...))
}

// venue checks one venue's Redis state, and adds its live holds to occupied.
func (a *audit) venue(v auditVenue, st redisstore.VenueState, db *auditDB, byID map[uint64]*auditBooking,
	byHold map[string]*auditBooking, occupied map[string]int, now time.Time) {
	sum := map[string]int{}
	for o, u := range st.Owners {
		for _, fl := range u.Fields {
			sum[fl] += u.Qty
		}
		if id, ok := o.Booking(); ok {
			b, found := byID[id]
			switch {
			case !found:
				a.r.LeakedUnits += u.Qty * len(u.Fields)
				a.add("venue %d: Redis counts %d units of booking %d, which MySQL does not have", v.id, u.Qty, id)
			case !b.status.Occupies():
				a.r.LeakedUnits += u.Qty * len(u.Fields)
				a.add("venue %d: Redis still counts booking %d, which is %s (leaked units)", v.id, id, b.status)
			}
			continue
		}
		holdID, ok := o.Hold()
		if !ok {
			continue // a move under way: its own owner, checked by the counters' sum
		}
		r, found := st.Holds[holdID]
		if !found {
			a.r.LeakedUnits += u.Qty * len(u.Fields)
			a.add("venue %d: Redis counts units of hold %s, which has no record", v.id, holdID)
			continue
		}
		switch r.Effective(now) {
		case booking.HoldHeld:
			for _, fl := range u.Fields {
				occupied[fl] += u.Qty
			}
		case booking.HoldConfirming:
			if _, booked := byHold[holdID]; !booked {
				for _, fl := range u.Fields {
					occupied[fl] += u.Qty
				}
			}
		default:
			if now.Sub(r.Deadline) > wheelSlack {
				a.r.LeakedUnits += u.Qty * len(u.Fields)
				a.add("venue %d: hold %s (%s) still counted %s after its deadline %s", v.id, holdID, r.Status,
					now.Sub(r.Deadline).Round(time.Millisecond), r.Deadline.Format(time.RFC3339Nano))
			}
		}
	}
	fields := map[string]bool{}
	for fl := range st.Used {
		fields[fl] = true
	}
	for fl := range sum {
		fields[fl] = true
	}
	for fl := range fields {
		used, c := st.Used[fl], st.Capacity[fl]
		if used != sum[fl] {
			if used > sum[fl] {
				a.r.LeakedUnits += used - sum[fl]
			}
			a.add("venue %d: slot %s counter is %d but its owners hold %d", v.id, fl, used, sum[fl])
		}
		if used > c {
			a.oversold(fl)
			a.add("venue %d: slot %s oversold in Redis: %d units taken of %d", v.id, fl, used, c)
		}
	}
	for fl, c := range st.Capacity {
		if sql, ok := db.capacity[fl]; ok && sql != c {
			a.add("venue %d: slot %s has capacity %d in Redis but %d in MySQL", v.id, fl, c, sql)
		}
	}
	// Every occupying booking of a loaded day owns its units (or its hold does, mid-confirm).
	for _, b := range db.bookings {
		if b.venueID != v.id || !b.status.Occupies() || !loaded(st, b, v.loc) {
			continue
		}
		u, ok := st.Owners[redisstore.BookingOwner(b.id)]
		if !ok {
			if _, holding := st.Owners[redisstore.HoldOwner(b.holdID)]; !holding {
				a.add("venue %d: booking %d (%s) occupies slots %v but Redis does not count it", v.id, b.id, b.status, b.fields)
			}
			continue
		}
		if u.Qty != b.qty || !sameFields(u.Fields, b.fields) {
			a.add("venue %d: booking %d counts %d×%v in Redis but %d×%v in MySQL", v.id, b.id, u.Qty, u.Fields, b.qty, b.fields)
		}
	}
}

// loaded reports whether Redis has loaded every resource-day of the booking's slots.
func loaded(st redisstore.VenueState, b auditBooking, loc *time.Location) bool {
	for _, fl := range b.fields {
		_, minute, _ := strings.Cut(fl, ":")
		m, err := strconv.ParseInt(minute, 10, 64)
		if err != nil {
			return false
		}
		day := time.Unix(m*60, 0).In(loc).Format(booking.DayLayout)
		if !st.Days[redisstore.DayField(redisstore.FieldResource(fl), day)] {
			return false
		}
	}
	return len(b.fields) > 0
}

func sameFields(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// releases checks every booking's releases against its history.
func (a *audit) releases(db *auditDB, defaultMode string, dueBy time.Time) {
	released := map[uint64]int{} // transitions into RELEASED
	left := map[uint64]int{}     // transitions out of RELEASED (a restore, a late check-in)
	last := map[uint64]time.Time{}
	first := map[uint64]time.Time{}
	for _, h := range db.history {
		if h.to == booking.Released {
			released[h.bookingID]++
			last[h.bookingID] = h.at
			if _, ok := first[h.bookingID]; !ok {
				first[h.bookingID] = h.at
			}
			if h.from != booking.Confirmed {
				a.add("booking %d released from %s", h.bookingID, h.from)
			}
		}
		if h.from == booking.Released {
			left[h.bookingID]++
		}
	}
	for _, b := range db.bookings {
		a.r.Releases = append(a.r.Releases, BookingRelease{BookingID: b.id, ResourceID: b.resourceID, Status: string(b.status),
			ReleaseAt: b.releaseAt, Released: first[b.id], CheckedIn: b.checkedInAt.Valid})
		if released[b.id] > 0 {
			a.r.Released++
			a.r.Due++
		}
		early := false
		want := left[b.id]
		if b.status == booking.Released {
			want++
			if at := last[b.id]; at.Before(b.releaseAt) {
				early = true
				a.add("booking %d released at %s, before its release_at %s", b.id, at.Format(time.RFC3339Nano), b.releaseAt.Format(time.RFC3339Nano))
			}
			if b.releasedAt.Valid && b.releasedAt.Time.Before(b.releaseAt) {
				early = true
				a.add("booking %d has released_at %s before its release_at %s", b.id, b.releasedAt.Time.Format(time.RFC3339Nano),
					b.releaseAt.Format(time.RFC3339Nano))
			}
		}
		if early {
			a.r.Early++
		}
		if released[b.id] > want {
			a.r.ReleasedTwice++
		}
		if released[b.id] != want {
			a.add("booking %d (%s) was released %d times; it was confirmed %d times", b.id, b.status, released[b.id], want)
		}
		mode := db.venue[b.venueID].releaseMode
		if mode == "" {
			mode = defaultMode
		}
		if b.status == booking.Confirmed && mode == "on" && !b.checkedInAt.Valid && b.releaseAt.Before(dueBy) {
			a.r.Unreleased++
			if released[b.id] == 0 {
				a.r.Due++
			}
			a.add("booking %d is still CONFIRMED %s after its release_at %s", b.id, time.Since(b.releaseAt).Round(time.Millisecond),
				b.releaseAt.Format(time.RFC3339Nano))
		}
	}
}
