package sqlstore

import (
	"context"
	"errors"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/sqlstore/sqldb"
	"github.com/slotwheel/slotwheel/models"
)

// ErrAlreadyWaiting: the user already waits for that window.
var ErrAlreadyWaiting = errors.New("already waiting for this window")

// Waitlist is the waitlist: users waiting for a window, each resource's queue of them, and the
// status moves of an entry (promoted to a hold, withdrawn, expired) with their events.
type Waitlist struct{ db *sqldb.DB }

// NewWait is a user's wait for units of a resource's window.
type NewWait struct {
	UserID     string
	VenueID    uint64
	ResourceID uint64
	Start, End time.Time
	Quantity   int
}

// JoinWaitlist inserts a WAITING entry made at at and answers its id; ErrAlreadyWaiting when the
// user already waits for the same window.
func (s *Waitlist) JoinWaitlist(ctx context.Context, in NewWait, at time.Time) (uint64, error) {
	key := waitingKey(in.UserID, in.ResourceID, in.Start.UnixMilli(), in.End.UnixMilli())
	w := models.WaitlistEntry{UserID: in.UserID, VenueID: in.VenueID, ResourceID: in.ResourceID,
		Status: string(booking.WaitWaiting), Start: in.Start, End: in.End, Quantity: in.Quantity, WaitingKey: &key,
		CreatedAt: at, UpdatedAt: at}
	err := s.db.WithContext(ctx).Create(&w).Error
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return 0, ErrAlreadyWaiting
	}
	return w.ID, sqldb.MapErr("join waitlist", err)
}

// waitingKey names a user's wait for one window; unique while the entry waits (or was promoted:
// see SetWaitStatus).
func waitingKey(user string, resource uint64, startMs, endMs int64) string {
	return user + "|" + strconv.FormatUint(resource, 10) + "|" + strconv.FormatInt(startMs, 10) + "|" + strconv.FormatInt(endMs, 10)
}

// WaitlistEntry reads one entry.
func (s *Waitlist) WaitlistEntry(ctx context.Context, id uint64) (models.WaitlistEntry, error) {
	var w models.WaitlistEntry
	return w, sqldb.MapErr("read waitlist", s.db.WithContext(ctx).First(&w, id).Error)
}

// UserWaitlist lists a user's entries, newest first.
func (s *Waitlist) UserWaitlist(ctx context.Context, userID string, limit int) ([]models.WaitlistEntry, error) {
	var rows []models.WaitlistEntry
	return rows, sqldb.MapErr("list waitlist", s.db.WithContext(ctx).Where("user_id = ?", userID).
		Order("created_at DESC, id DESC").Limit(limit).Find(&rows).Error)
}

// Waiting lists the WAITING entries of a resource, first come first.
func (s *Waitlist) Waiting(ctx context.Context, resourceID uint64, limit int) ([]models.WaitlistEntry, error) {
	var rows []models.WaitlistEntry
	return rows, sqldb.MapErr("waiting", s.db.WithContext(ctx).Where("resource_id = ? AND status = ?", resourceID, string(booking.WaitWaiting)).
		Order("created_at, id").Limit(limit).Find(&rows).Error)
}

// ResourcesWithWaiters lists resources that have WAITING entries.
func (s *Waitlist) ResourcesWithWaiters(ctx context.Context, limit int) ([]uint64, error) {
	var ids []uint64
	return ids, sqldb.MapErr("waiting resources", s.db.WithContext(ctx).Model(&models.WaitlistEntry{}).
		Where("status = ?", string(booking.WaitWaiting)).Distinct().Limit(limit).Pluck("resource_id", &ids).Error)
}

// PromotedFor finds the PROMOTED entry a hold was made for.
func (s *Waitlist) PromotedFor(ctx context.Context, holdID string) (models.WaitlistEntry, bool, error) {
	var w models.WaitlistEntry
	err := s.db.WithContext(ctx).Where("hold_id = ? AND status = ?", holdID, string(booking.WaitPromoted)).First(&w).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return w, false, nil
	}
	return w, err == nil, sqldb.MapErr("promoted entry", err)
}

// SetWaitStatus moves an entry from one status to another (only if it is still in from), with its
// event when one is given; sqldb.ErrStale when it was not in from any more.
func (s *Waitlist) SetWaitStatus(ctx context.Context, id uint64, from, to booking.WaitStatus, holdID string, at time.Time, ev *Event) error {
	err := s.db.Tx(ctx, "set waitlist status", func(tx *gorm.DB) error {
		upd := map[string]any{"status": string(to), "updated_at": at}
		if to != booking.WaitPromoted {
			upd["waiting_key"] = nil // a promoted waiter still has their claim on the window
		}
		if holdID != "" {
			upd["hold_id"] = holdID
		}
		res := tx.Model(&models.WaitlistEntry{}).Where("id = ? AND status = ?", id, string(from)).Updates(upd)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return sqldb.ErrStale
		}
		if ev != nil {
			return insertEvents(tx, []Event{*ev})
		}
		return nil
	})
	return err
}

// IsStale reports that a conditional change found the row changed.
func IsStale(err error) bool { return errors.Is(err, sqldb.ErrStale) }
