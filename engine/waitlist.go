package engine

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/models"
)

// JoinWaitlist puts a user in line for a resource window. The window is checked like a hold's (on
// the grid, not past, within the horizon). If its units are free right now the entry is promoted at
// once, so the answer already carries the hold to pay.
func (e *Engine) JoinWaitlist(ctx context.Context, req WaitlistRequest) (WaitlistEntry, error) {
	if req.UserID == "" {
		return WaitlistEntry{}, ErrForbidden
	}
	var err error
	if req.Quantity, err = quantityOrOne(req.Quantity); err != nil {
		return WaitlistEntry{}, err
	}
	if req.ResourceID == 0 {
		return WaitlistEntry{}, Invalid("missing_resource_id", "resource_id is required")
	}
	if req.Start.IsZero() || req.End.IsZero() {
		return WaitlistEntry{}, Invalid("missing_start", "start and end are required")
	}
	w, err := e.resolve(ctx, HoldRequest{UserID: req.UserID, ResourceID: req.ResourceID, Start: req.Start, End: req.End,
		Quantity: req.Quantity}, req.ResourceID, nil)
	if err != nil {
		return WaitlistEntry{}, err
	}
	now := e.clock.Now()
	row := models.WaitlistEntry{UserID: req.UserID, VenueID: w.ri.res.VenueID, ResourceID: req.ResourceID,
		Status: models.WaitWaiting, Start: w.start, End: w.end, Quantity: req.Quantity, CreatedAt: now, UpdatedAt: now}
	if err := e.db.WithContext(ctx).Create(&row).Error; err != nil {
		return WaitlistEntry{}, backendErr("join waitlist", err)
	}
	if err := e.promote(ctx, req.ResourceID); err != nil {
		e.log.Warn("waitlist promotion failed; the wheel retries", "resource_id", req.ResourceID, "err", err)
	}
	return e.waitlistEntry(ctx, row.ID)
}

// LeaveWaitlist takes a waiting entry out of line. Owner or admin; a promoted entry keeps its hold
// (give that up with CancelHold).
func (e *Engine) LeaveWaitlist(ctx context.Context, a Actor, id uint64) (WaitlistEntry, error) {
	var row models.WaitlistEntry
	if err := e.db.WithContext(ctx).First(&row, id).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return WaitlistEntry{}, ErrNotFound
		}
		return WaitlistEntry{}, backendErr("leave waitlist", err)
	}
	if a.Role != RoleAdmin && (a.UserID == "" || a.UserID != row.UserID) {
		return WaitlistEntry{}, ErrNotFound
	}
	if row.Status == models.WaitWaiting {
		if err := e.db.WithContext(ctx).Model(&models.WaitlistEntry{}).Where("id = ? AND status = ?", id, models.WaitWaiting).
			Updates(map[string]any{"status": models.WaitCancelled, "updated_at": e.clock.Now()}).Error; err != nil {
			return WaitlistEntry{}, backendErr("leave waitlist", err)
		}
	}
	return e.waitlistEntry(ctx, id)
}

// ListWaitlist lists the actor's entries, newest first.
func (e *Engine) ListWaitlist(ctx context.Context, a Actor) ([]WaitlistEntry, error) {
	var rows []models.WaitlistEntry
	if err := e.db.WithContext(ctx).Where("user_id = ?", a.UserID).Order("id DESC").Limit(100).Find(&rows).Error; err != nil {
		return nil, backendErr("list waitlist", err)
	}
	out := make([]WaitlistEntry, 0, len(rows))
	for _, r := range rows {
		out = append(out, e.toWaitlistEntry(ctx, r))
	}
	return out, nil
}

func (e *Engine) waitlistEntry(ctx context.Context, id uint64) (WaitlistEntry, error) {
	var row models.WaitlistEntry
	if err := e.db.WithContext(ctx).First(&row, id).Error; err != nil {
		return WaitlistEntry{}, backendErr("read waitlist", err)
	}
	return e.toWaitlistEntry(ctx, row), nil
}

func (e *Engine) toWaitlistEntry(ctx context.Context, r models.WaitlistEntry) WaitlistEntry {
	out := WaitlistEntry{ID: r.ID, UserID: r.UserID, VenueID: r.VenueID, ResourceID: r.ResourceID, Status: r.Status,
		Start: r.Start, End: r.End, Quantity: r.Quantity, HoldID: r.HoldID, CreatedAt: r.CreatedAt}
	if vi, err := e.venue(ctx, r.VenueID); err == nil {
		out.Start, out.End, out.CreatedAt = out.Start.In(vi.loc), out.End.In(vi.loc), out.CreatedAt.In(vi.loc)
	}
	return out
}

// promote gives holds to the waiters of a resource, first come first served, while units are free.
// A waiter whose window is full is skipped (a later, smaller window may fit); one whose window has
// ended expires. Racing instances cannot promote an entry twice: the WAITING → PROMOTED update is
// conditional, and a hold that lost that race is given back.
func (e *Engine) promote(ctx context.Context, resourceID uint64) error {
	var rows []models.WaitlistEntry
	if err := e.db.WithContext(ctx).Where("resource_id = ? AND status = ?", resourceID, models.WaitWaiting).
		Order("id").Limit(200).Find(&rows).Error; err != nil {
		return err
	}
	for _, r := range rows {
		now := e.clock.Now()
		h, err := e.Hold(ctx, HoldRequest{UserID: r.UserID, ResourceID: r.ResourceID, Start: r.Start, End: r.End, Quantity: r.Quantity})
		switch {
		case errors.Is(err, ErrSlotFull):
			continue
		case errors.Is(err, ErrSlotPast), errors.Is(err, ErrSlotClosed), errors.Is(err, ErrOffGrid), errors.Is(err, ErrResourceInactive):
			if err := e.setWaitStatus(ctx, r.ID, models.WaitExpired, "", now); err != nil {
				return err
			}
			continue
		case err != nil:
			if _, domain := AsError(err); domain {
				continue // e.g. too_far after a horizon change: it may fit later; others still get their turn
			}
			return err
		}
		if err := e.setWaitStatus(ctx, r.ID, models.WaitPromoted, h.ID, now); err != nil {
			if _, cerr := e.CancelHold(ctx, System, h.ID); cerr != nil {
				e.log.Warn("give back an unneeded waitlist hold", "hold_id", h.ID, "err", cerr)
			}
			if errors.Is(err, errStale) {
				continue
			}
			return err
		}
		e.log.Info("waitlist promoted", "entry", r.ID, "user", r.UserID, "hold_id", h.ID)
	}
	return nil
}

func (e *Engine) setWaitStatus(ctx context.Context, id uint64, status, holdID string, now time.Time) error {
	return e.tx(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&models.WaitlistEntry{}).Where("id = ? AND status = ?", id, models.WaitWaiting).
			Updates(map[string]any{"status": status, "hold_id": holdID, "updated_at": now})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return errStale
		}
		if status == models.WaitPromoted {
			return tx.Create(&models.OutboxEvent{Type: "waitlist.promoted", CreatedAt: now,
				Payload: `{"waitlist_id":"` + uintString(id) + `","hold_id":"` + holdID + `"}`}).Error
		}
		return nil
	})
}

// promoteWaiting runs promotion for every resource that has waiters (the wheel calls it every
// second, which covers units freed by expired holds; releases and cancels promote at once).
func (e *Engine) promoteWaiting(ctx context.Context) error {
	var ids []uint64
	if err := e.db.WithContext(ctx).Model(&models.WaitlistEntry{}).Where("status = ?", models.WaitWaiting).
		Distinct().Limit(500).Pluck("resource_id", &ids).Error; err != nil {
		return err
	}
	for _, id := range ids {
		if err := e.promote(ctx, id); err != nil {
			return err
		}
	}
	return nil
}
