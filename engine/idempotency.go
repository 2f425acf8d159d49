package engine

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/slotwheel/slotwheel/models"
)

// Idempotency keys live in SQL, beside the bookings they protect, so that they survive a Redis loss.
const (
	idempotencyTTL = 25 * time.Hour // API.md promises at least 24 hours
	// inProgressTTL: a reservation whose request never finished (the process died) is given up
	// after this, so that the client's retry runs instead of answering 409 for a day.
	inProgressTTL = time.Minute
)

// BeginIdempotent reserves scope (caller + method + path + Idempotency-Key) for a request whose body
// hashes to requestHash. It returns nil when the caller should run the request, the stored answer
// when the same request already ran, ErrIdempotencyKeyReused when the key came with another body and
// ErrRequestInProgress while the first request still runs.
func (e *Engine) BeginIdempotent(ctx context.Context, scope, requestHash string) (*StoredResponse, error) {
	now := e.clock.Now()
	for attempt := 0; attempt < 3; attempt++ {
		row := models.IdempotencyKey{Scope: scope, RequestHash: requestHash, CreatedAt: now, ExpiresAt: now.Add(idempotencyTTL)}
		res := e.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
		if res.Error != nil {
			return nil, backendErr("idempotency", res.Error)
		}
		if res.RowsAffected == 1 {
			return nil, nil
		}
		var prev models.IdempotencyKey
		err := e.db.WithContext(ctx).First(&prev, "scope = ?", scope).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			continue // forgotten meanwhile: try to reserve again
		}
		if err != nil {
			return nil, backendErr("idempotency", err)
		}
		stale := !prev.Done && now.Sub(prev.CreatedAt) > inProgressTTL
		if now.After(prev.ExpiresAt) || stale {
			e.db.WithContext(ctx).Where("scope = ? AND created_at = ?", scope, prev.CreatedAt).Delete(&models.IdempotencyKey{})
			continue
		}
		if prev.RequestHash != requestHash {
			return nil, ErrIdempotencyKeyReused
		}
		if !prev.Done {
			return nil, ErrRequestInProgress
		}
		return &StoredResponse{Status: prev.StatusCode, Body: prev.Body}, nil
	}
	return nil, ErrRequestInProgress
}

// FinishIdempotent stores the answer of a reserved request.
func (e *Engine) FinishIdempotent(ctx context.Context, scope string, resp StoredResponse) error {
	err := e.db.WithContext(context.WithoutCancel(ctx)).Model(&models.IdempotencyKey{}).Where("scope = ?", scope).
		Updates(map[string]any{"done": true, "status_code": resp.Status, "body": resp.Body}).Error
	return backendErr("idempotency", err)
}

// AbandonIdempotent forgets a reservation whose request failed on the server's side, so a retry
// runs again.
func (e *Engine) AbandonIdempotent(ctx context.Context, scope string) error {
	err := e.db.WithContext(context.WithoutCancel(ctx)).Where("scope = ? AND done = ?", scope, false).
		Delete(&models.IdempotencyKey{}).Error
	return backendErr("idempotency", err)
}

// purgeIdempotency drops expired keys (run by reconciliation).
func (e *Engine) purgeIdempotency(ctx context.Context) error {
	return e.db.WithContext(ctx).Where("expires_at < ?", e.clock.Now()).Delete(&models.IdempotencyKey{}).Error
}
