package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/slotwheel/slotwheel/models"
)

// transitions is the one table of allowed booking status changes (DESIGN.md "States"). HELD →
// CONFIRMED happens at insert; everything after goes through change().
var transitions = map[string][]string{
	models.StatusConfirmed:  {models.StatusArrived, models.StatusReleased, models.StatusCancelledByUser, models.StatusCancelledByAdmin},
	models.StatusArrived:    {models.StatusInProgress, models.StatusCompleted, models.StatusCancelledByAdmin},
	models.StatusInProgress: {models.StatusCompleted},
	models.StatusReleased:   {models.StatusConfirmed, models.StatusArrived}, // restore, within the window
}

func allowed(from, to string) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// errStale: the row changed between read and version-checked update; reload and decide again.
var errStale = errors.New("booking changed concurrently")

// change applies one guarded transition with a version-checked update, a history row and an outbox
// event in one transaction. mutate sets the columns that go with the new status.
func (e *Engine) change(ctx context.Context, b *models.Booking, to, actor, reason string, mutate func(*models.Booking), also func(tx *gorm.DB) error) error {
	if !allowed(b.Status, to) {
		return ErrInvalidTransition
	}
	now := e.clock.Now()
	next := *b
	next.Status, next.Version, next.UpdatedAt = to, b.Version+1, now
	if mutate != nil {
		mutate(&next)
	}
	err := e.tx(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&models.Booking{}).Where("id = ? AND version = ?", b.ID, b.Version).
			Select("status", "version", "updated_at", "release_at", "checked_in_at", "released_at", "cancelled_at", "release_task_at").
			Updates(&next)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return errStale
		}
		if err := writeHistory(tx, b.ID, b.Status, to, next.Version, actor, reason, now); err != nil {
			return err
		}
		if also != nil {
			if err := also(tx); err != nil {
				return err
			}
		}
		return writeEvent(tx, b.ID, "booking."+strings.ToLower(to), now, map[string]any{"from": b.Status, "reason": reason})
	})
	if err != nil {
		if errors.Is(err, errStale) {
			return err
		}
		return backendErr("booking "+strconv.FormatUint(b.ID, 10)+" → "+to, err)
	}
	metricTransitions.WithLabelValues(b.Status, to).Inc()
	*b = next
	return nil
}

func writeHistory(tx *gorm.DB, id uint64, from, to string, version int, actor, reason string, at time.Time) error {
	return tx.Create(&models.BookingHistory{BookingID: id, FromStatus: from, ToStatus: to, Version: version,
		Actor: truncate(actor, 80), Reason: reason, At: at}).Error
}

func writeEvent(tx *gorm.DB, id uint64, typ string, at time.Time, payload map[string]any) error {
	payload["booking_id"] = strconv.FormatUint(id, 10)
	body, _ := json.Marshal(payload)
	return tx.Create(&models.OutboxEvent{BookingID: id, Type: typ, Payload: string(body), CreatedAt: at}).Error
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func actorName(a Actor) string { return a.Role + ":" + a.UserID }

// retry runs fn until it does not report errStale, reloading the booking each time.
func (e *Engine) retry(ctx context.Context, id uint64, fn func(b *models.Booking) error) (models.Booking, error) {
	for i := 0; ; i++ {
		var b models.Booking
		if err := e.db.WithContext(ctx).First(&b, id).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return b, ErrNotFound
			}
			return b, backendErr("load booking", err)
		}
		err := fn(&b)
		if !errors.Is(err, errStale) || i >= 10 {
			return b, err
		}
	}
}

func (e *Engine) bookingByID(ctx context.Context, id uint64) (Booking, error) {
	var b models.Booking
	if err := e.db.WithContext(ctx).First(&b, id).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return Booking{}, ErrNotFound
		}
		return Booking{}, backendErr("load booking", err)
	}
	return e.toBooking(ctx, b)
}

func (e *Engine) bookingByHold(ctx context.Context, holdID string) (Booking, bool, error) {
	var b models.Booking
	err := e.db.WithContext(ctx).First(&b, "hold_id = ?", holdID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Booking{}, false, nil
	}
	if err != nil {
		return Booking{}, false, backendErr("load booking", err)
	}
	out, err := e.toBooking(ctx, b)
	return out, err == nil, err
}

// toBooking converts a row for callers, in the venue's zone.
func (e *Engine) toBooking(ctx context.Context, b models.Booking) (Booking, error) {
	vi, err := e.venue(ctx, b.VenueID)
	if err != nil {
		return Booking{}, err
	}
	loc := vi.loc
	in := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		x := t.In(loc)
		return &x
	}
	out := Booking{ID: b.ID, HoldID: b.HoldID, UserID: b.UserID, VenueID: b.VenueID, ResourceID: b.ResourceID,
		Quantity: b.Quantity, Status: b.Status, Version: b.Version, Start: b.Start.In(loc), End: b.End.In(loc),
		OccupyStart: b.OccupyStart.In(loc), OccupyEnd: b.OccupyEnd.In(loc), ReleaseAt: b.ReleaseAt.In(loc),
		ConfirmedAt: b.ConfirmedAt.In(loc), CheckedInAt: in(b.CheckedInAt), ReleasedAt: in(b.ReleasedAt),
		CancelledAt: in(b.CancelledAt), CheckinCode: b.CheckinCode, AmountCents: b.AmountCents}
	if b.ServiceID != nil {
		out.ServiceID = *b.ServiceID
	}
	if b.PaymentID != nil {
		out.PaymentID = *b.PaymentID
	}
	return out, nil
}

func visible(a Actor, b *models.Booking) bool {
	switch a.Role {
	case RoleAdmin:
		return true
	case RoleStaff:
		return a.VenueID == b.VenueID
	}
	return a.UserID != "" && a.UserID == b.UserID
}

// GetBooking reads a booking. Owner, staff of its venue, or admin; others get ErrNotFound.
func (e *Engine) GetBooking(ctx context.Context, a Actor, id uint64) (Booking, error) {
	var b models.Booking
	if err := e.db.WithContext(ctx).First(&b, id).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return Booking{}, ErrNotFound
		}
		return Booking{}, backendErr("load booking", err)
	}
	if !visible(a, &b) {
		return Booking{}, ErrNotFound
	}
	return e.toBooking(ctx, b)
}

// ListBookings lists bookings newest first: the caller's own (API.md's "mine"; staff included, so that
// a desk account does not see guests' check-in codes), or all for an admin. The cursor is opaque to
// callers (the last id seen).
func (e *Engine) ListBookings(ctx context.Context, a Actor, cursor string, limit int) ([]Booking, string, error) {
	if limit <= 0 || limit > 100 {
		limit = 50
	}
	q := e.db.WithContext(ctx).Order("id DESC").Limit(limit + 1)
	switch a.Role {
	case RoleAdmin:
	default:
		q = q.Where("user_id = ?", a.UserID)
	}
	if cursor != "" {
		after, err := strconv.ParseUint(cursor, 10, 64)
		if err != nil {
			return nil, "", Invalid("invalid_cursor", "cursor %q is not one this server gave", cursor)
		}
		q = q.Where("id < ?", after)
	}
	var rows []models.Booking
	if err := q.Find(&rows).Error; err != nil {
		return nil, "", backendErr("list bookings", err)
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		next = strconv.FormatUint(rows[limit-1].ID, 10)
	}
	out := make([]Booking, 0, len(rows))
	for _, r := range rows {
		b, err := e.toBooking(ctx, r)
		if err != nil {
			return nil, "", err
		}
		out = append(out, b)
	}
	return out, next, nil
}

// CancelBooking cancels a booking and gives its units back. Owner (CANCELLED_BY_USER) or admin
// (CANCELLED_BY_ADMIN).
func (e *Engine) CancelBooking(ctx context.Context, a Actor, id uint64) (Booking, error) {
	b, err := e.retry(ctx, id, func(b *models.Booking) error {
		if !(a.Role == RoleAdmin || (a.UserID != "" && a.UserID == b.UserID)) {
			return ErrNotFound
		}
		to := models.StatusCancelledByUser
		if a.Role == RoleAdmin {
			to = models.StatusCancelledByAdmin
		}
		if b.Status == to {
			return nil // a repeated cancel
		}
		now := e.clock.Now()
		return e.change(ctx, b, to, actorName(a), "cancelled", func(n *models.Booking) { n.CancelledAt = &now }, nil)
	})
	if err != nil {
		return Booking{}, err
	}
	e.giveBack(ctx, b)
	e.promoteAfterFree(ctx, b.ResourceID)
	if e.sched != nil {
		if err := e.sched.CancelRelease(ctx, ReleaseRef{BookingID: b.ID, ReleaseAt: b.ReleaseAt}); err != nil {
			e.log.Warn("cancel release task failed; its handler will do nothing", "booking_id", b.ID, "err", err)
		}
	}
	return e.toBooking(ctx, b)
}

// giveBack returns a booking's units after SQL stopped counting them. Idempotent; a failure is
// repaired by reconciliation, which frees units whose booking no longer occupies.
func (e *Engine) giveBack(ctx context.Context, b models.Booking) {
	v := b.VenueID
	k := e.keys
	err := e.scripts.giveBack.Run(context.WithoutCancel(ctx), e.rdb, []string{k.Owners(v), k.Used(v), k.Gone(v)},
		BookingOwner(b.ID), e.clock.Now().UnixMilli(), (2 * keep).Milliseconds()).Err()
	if err != nil {
		e.log.Error("give back units failed; reconciliation will", "booking_id", b.ID, "err", err)
	}
}

// promoteAfterFree offers freed units to the resource's first waiters at once. A failure is only
// logged: the wheel's sweep promotes every second anyway.
func (e *Engine) promoteAfterFree(ctx context.Context, resourceID uint64) {
	if err := e.promote(ctx, resourceID); err != nil {
		e.log.Warn("waitlist promotion failed; the wheel retries", "resource_id", resourceID, "err", err)
	}
}

// takeBack re-takes a booking's units for a restore: they must still be free.
func (e *Engine) takeBack(ctx context.Context, b *models.Booking) error {
	v := b.VenueID
	k := e.keys
	ri, err := e.resource(ctx, b.ResourceID)
	if err != nil {
		return err
	}
	for _, day := range bookingDays(b, ri.venue.loc) {
		loaded, err := e.rdb.SIsMember(ctx, k.Days(v), DayField(b.ResourceID, day)).Result()
		if err != nil {
			return backendErr("restore", err)
		}
		if !loaded {
			if err := e.loadDay(ctx, ri, day); err != nil {
				return err
			}
		}
	}
	out, err := e.scripts.ensureOwner.Run(ctx, e.rdb, []string{k.Capacity(v), k.Used(v), k.Owners(v), k.Gone(v)},
		BookingOwner(b.ID), HoldOwner(b.HoldID), b.Quantity, b.Slots, "1", "1").Text()
	if err != nil {
		return backendErr("restore", err)
	}
	switch out {
	case "full", "closed":
		return ErrSlotFull
	}
	return nil
}

func bookingDays(b *models.Booking, loc *time.Location) []string {
	var days []string
	for d := localDay(b.OccupyStart, loc); d.Before(b.OccupyEnd); d = d.AddDate(0, 0, 1) {
		days = append(days, d.Format(dayLayout))
	}
	return days
}

// CheckIn accepts a booking's check-in code. Staff of its venue or admin. A check-in received before
// release_at always wins over the release: if the release got there first, the booking is restored.
func (e *Engine) CheckIn(ctx context.Context, a Actor, code string) (Booking, error) {
	if a.Role != RoleStaff && a.Role != RoleAdmin {
		return Booking{}, ErrForbidden
	}
	received := e.clock.Now()
	code = strings.ToUpper(strings.TrimSpace(code))
	if code == "" || len(code) > 16 {
		return Booking{}, Invalid("invalid_checkin_code", "checkin_code is not a check-in code")
	}
	var row models.Booking
	if err := e.db.WithContext(ctx).Select("id").First(&row, "checkin_code = ?", code).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return Booking{}, ErrNotFound
		}
		return Booking{}, backendErr("check in", err)
	}
	tookBack := false
	b, err := e.retry(ctx, row.ID, func(b *models.Booking) error {
		if a.Role == RoleStaff && a.VenueID != b.VenueID {
			return ErrNotFound
		}
		now := e.clock.Now()
		arrive := func(n *models.Booking) { n.CheckedInAt = &received }
		switch b.Status {
		case models.StatusArrived, models.StatusInProgress:
			return nil // scanned twice
		case models.StatusConfirmed:
			if received.Before(b.Start.Add(-e.opts.CheckinOpens)) {
				return ErrTooEarly
			}
			if !received.Before(b.ReleaseAt.Add(e.opts.RestoreWindow)) {
				return ErrTooLate
			}
			return e.change(ctx, b, models.StatusArrived, actorName(a), "checked in", arrive, nil)
		case models.StatusReleased:
			releasedAt := b.ReleaseAt
			if b.ReleasedAt != nil {
				releasedAt = *b.ReleasedAt
			}
			// Received before release_at (the release won the race by a hair), or within the restore
			// window: the booking comes back if its units are still free.
			if !received.Before(b.ReleaseAt) && now.Sub(releasedAt) > e.opts.RestoreWindow {
				return ErrTooLate
			}
			if !tookBack {
				if err := e.takeBack(ctx, b); err != nil {
					return err
				}
				tookBack = true
			}
			err := e.change(ctx, b, models.StatusArrived, actorName(a), "checked in after release", arrive, nil)
			if err != nil && !errors.Is(err, errStale) {
				e.giveBack(ctx, *b)
				tookBack = false
			}
			return err
		default:
			return ErrInvalidTransition
		}
	})
	if err != nil {
		return Booking{}, err
	}
	return e.toBooking(ctx, b)
}

// Restore takes a released booking back within the restore window, if its units are still free:
// RELEASED → CONFIRMED with release_at = now + grace and a new release task. Owner or admin.
func (e *Engine) Restore(ctx context.Context, a Actor, id uint64) (Booking, error) {
	tookBack := false
	b, err := e.retry(ctx, id, func(b *models.Booking) error {
		if !(a.Role == RoleAdmin || (a.UserID != "" && a.UserID == b.UserID)) {
			return ErrNotFound
		}
		if b.Status != models.StatusReleased {
			return ErrInvalidTransition
		}
		now := e.clock.Now()
		if b.ReleasedAt == nil || now.Sub(*b.ReleasedAt) > e.opts.RestoreWindow {
			return ErrRestoreWindowClosed
		}
		ri, err := e.resource(ctx, b.ResourceID)
		if err != nil {
			return err
		}
		grace, err := e.graceFor(ctx, ri.res.Category, b.Start, ri.venue.loc)
		if err != nil {
			return err
		}
		if !tookBack {
			if err := e.takeBack(ctx, b); err != nil {
				return err
			}
			tookBack = true
		}
		err = e.change(ctx, b, models.StatusConfirmed, actorName(a), "restored", func(n *models.Booking) {
			n.ReleaseAt, n.ReleasedAt, n.ReleaseTaskAt = now.Add(grace), nil, nil
		}, nil)
		if err != nil && !errors.Is(err, errStale) {
			e.giveBack(ctx, *b)
			tookBack = false
		}
		return err
	})
	if err != nil {
		return Booking{}, err
	}
	e.scheduleIfDue(ctx, b)
	return e.toBooking(ctx, b)
}

// Release moves an overdue CONFIRMED booking to RELEASED and gives its units back. It never acts
// before release_at (a *NotDueError says how long to wait), and a duplicate delivery, a checked-in
// or cancelled booking, or a ref whose release_at was changed by a restore do nothing.
func (e *Engine) Release(ctx context.Context, ref ReleaseRef) (ReleaseOutcome, error) {
	outcome := NotApplicable
	b, err := e.retry(ctx, ref.BookingID, func(b *models.Booking) error {
		outcome = NotApplicable
		if !b.ReleaseAt.Equal(ref.ReleaseAt) && !ref.ReleaseAt.IsZero() {
			return nil
		}
		switch b.Status {
		case models.StatusReleased:
			outcome = AlreadyReleased
			return nil
		case models.StatusConfirmed:
		default:
			return nil
		}
		now := e.clock.Now()
		if now.Before(b.ReleaseAt) {
			return &NotDueError{Wait: b.ReleaseAt.Sub(now)}
		}
		err := e.change(ctx, b, models.StatusReleased, "system", "no-show", func(n *models.Booking) { n.ReleasedAt = &now },
			func(tx *gorm.DB) error { return countNoShow(tx, b.UserID, now) })
		if err == nil {
			outcome = Released
			metricReleaseLag.Observe(now.Sub(b.ReleaseAt).Seconds())
		}
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return NotApplicable, nil
	}
	if err != nil {
		return "", err
	}
	if outcome == Released || outcome == AlreadyReleased {
		e.giveBack(ctx, b)
		e.promoteAfterFree(ctx, b.ResourceID)
	}
	return outcome, nil
}

func countNoShow(tx *gorm.DB, userID string, now time.Time) error {
	return tx.Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "user_id"}},
		DoUpdates: clause.Assignments(map[string]any{"no_shows": gorm.Expr("no_shows + 1"), "updated_at": now}),
	}).Create(&models.UserStat{UserID: userID, NoShows: 1, UpdatedAt: now}).Error
}

// NoShows reads a user's no-show count.
func (e *Engine) NoShows(ctx context.Context, userID string) (int, error) {
	var s models.UserStat
	err := e.db.WithContext(ctx).First(&s, "user_id = ?", userID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return 0, nil
	}
	return s.NoShows, backendErr("read no-shows", err)
}

// DueReleases lists CONFIRMED bookings whose release_at is before until and whose task is not yet
// queued, oldest first; it reads MySQL's (status, release_at) index.
func (e *Engine) DueReleases(ctx context.Context, until time.Time, limit int) ([]ReleaseRef, error) {
	var rows []models.Booking
	if err := e.db.WithContext(ctx).Select("id, release_at").
		Where("status = ? AND release_at <= ? AND release_task_at IS NULL", models.StatusConfirmed, until.UTC()).
		Order("release_at").Limit(limit).Find(&rows).Error; err != nil {
		return nil, backendErr("due releases", err)
	}
	out := make([]ReleaseRef, len(rows))
	for i, r := range rows {
		out[i] = ReleaseRef{BookingID: r.ID, ReleaseAt: r.ReleaseAt}
	}
	return out, nil
}

// MarkReleaseQueued records that the release tasks of refs are in the queue, so the loader stops
// offering them. A booking restored meanwhile (another release_at) stays unmarked.
func (e *Engine) MarkReleaseQueued(ctx context.Context, refs []ReleaseRef) error {
	if len(refs) == 0 {
		return nil
	}
	now := e.clock.Now()
	err := e.tx(ctx, func(tx *gorm.DB) error {
		for _, r := range refs {
			if err := tx.Model(&models.Booking{}).Where("id = ? AND release_at = ?", r.BookingID, r.ReleaseAt.UTC()).
				Update("release_task_at", now).Error; err != nil {
				return err
			}
		}
		return nil
	})
	return backendErr("mark release queued", err)
}
