package sqlstore

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/slotwheel/slotwheel/internal/sqlstore/sqldb"
	"github.com/slotwheel/slotwheel/models"
)

// Idempotency is the record of API requests made with an idempotency key: the reservation of a
// key, the answer stored for its repeats, and the purge of expired records.
type Idempotency struct{ db *sqldb.DB }

// IdemRecord is an idempotency record.
type IdemRecord struct {
	RequestHash string
	Done        bool
	Status      int
	Body        []byte
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

// ReserveIdem inserts a reservation for scope unless one exists; it answers whether it did, and the
// existing record otherwise.
func (s *Idempotency) ReserveIdem(ctx context.Context, scope string, r IdemRecord) (bool, IdemRecord, error) {
	row := models.IdempotencyKey{Scope: scope, RequestHash: r.RequestHash, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt}
	res := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
	if res.Error != nil {
		return false, IdemRecord{}, sqldb.MapErr("idempotency", res.Error)
	}
	if res.RowsAffected == 1 {
		return true, IdemRecord{}, nil
	}
	var prev models.IdempotencyKey
	err := s.db.WithContext(ctx).First(&prev, "scope = ?", scope).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return false, IdemRecord{}, sqldb.ErrStale // forgotten meanwhile: try again
	}
	if err != nil {
		return false, IdemRecord{}, sqldb.MapErr("idempotency", err)
	}
	return false, IdemRecord{RequestHash: prev.RequestHash, Done: prev.Done, Status: prev.StatusCode, Body: prev.Body,
		CreatedAt: prev.CreatedAt.UTC(), ExpiresAt: prev.ExpiresAt.UTC()}, nil
}

// ForgetIdem deletes scope's record if it is the one created at createdAt.
func (s *Idempotency) ForgetIdem(ctx context.Context, scope string, createdAt time.Time) error {
	return sqldb.MapErr("idempotency", s.db.WithContext(ctx).Where("scope = ? AND created_at = ?", scope, createdAt.UTC()).
		Delete(&models.IdempotencyKey{}).Error)
}

// FinishIdem stores the answer of a reserved request.
func (s *Idempotency) FinishIdem(ctx context.Context, scope string, status int, body []byte) error {
	return sqldb.MapErr("idempotency", s.db.WithContext(ctx).Model(&models.IdempotencyKey{}).Where("scope = ?", scope).
		Updates(map[string]any{"done": true, "status_code": status, "body": body}).Error)
}

// AbandonIdem forgets a reservation whose request failed on the server's side.
func (s *Idempotency) AbandonIdem(ctx context.Context, scope string) error {
	return sqldb.MapErr("idempotency", s.db.WithContext(ctx).Where("scope = ? AND done = ?", scope, false).
		Delete(&models.IdempotencyKey{}).Error)
}

// PurgeIdem drops expired records.
func (s *Idempotency) PurgeIdem(ctx context.Context, now time.Time) error {
	return sqldb.MapErr("idempotency", s.db.WithContext(ctx).Where("expires_at < ?", now.UTC()).Delete(&models.IdempotencyKey{}).Error)
}
