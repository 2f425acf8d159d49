package sqlstore

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/slotwheel/slotwheel/models"
)

// Unpublished lists outbox events not yet handed to their sinks, oldest first.
func (s *Store) Unpublished(ctx context.Context, limit int) ([]models.OutboxEvent, error) {
	var rows []models.OutboxEvent
	return rows, mapErr("unpublished events", s.db.WithContext(ctx).Where("published_at IS NULL").Order("id").Limit(limit).Find(&rows).Error)
}

// Publish records the deliveries of events (a repeat of one already there is left as it is) and
// marks the events published, in one transaction. It answers the deliveries still pending.
func (s *Store) Publish(ctx context.Context, eventIDs []uint64, ds []models.Delivery, at time.Time) ([]models.Delivery, error) {
	var pending []models.Delivery
	err := s.tx(ctx, "publish events", func(tx *gorm.DB) error {
		if len(ds) > 0 {
			if err := tx.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(ds, 500).Error; err != nil {
				return err
			}
		}
		if err := tx.Where("event_id IN ? AND status = ?", eventIDs, models.DeliveryPending).Order("event_id").
			Find(&pending).Error; err != nil {
			return err
		}
		return tx.Model(&models.OutboxEvent{}).Where("id IN ?", eventIDs).Update("published_at", at).Error
	})
	return pending, err
}

// Event reads one outbox event.
func (s *Store) Event(ctx context.Context, id uint64) (models.OutboxEvent, error) {
	var e models.OutboxEvent
	return e, mapErr("read event", s.db.WithContext(ctx).First(&e, id).Error)
}

// Delivery reads one delivery.
func (s *Store) Delivery(ctx context.Context, id uint64) (models.Delivery, error) {
	var d models.Delivery
	return d, mapErr("read delivery", s.db.WithContext(ctx).First(&d, id).Error)
}

// EarlierPending reports whether an earlier event of the same subject still waits for the same
// sink: deliveries go out in event order per subject.
func (s *Store) EarlierPending(ctx context.Context, d models.Delivery) (bool, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&models.Delivery{}).
		Where("sink = ? AND subject = ? AND status = ? AND event_id < ?", d.Sink, d.Subject, models.DeliveryPending, d.EventID).
		Limit(1).Count(&n).Error
	return n > 0, mapErr("earlier deliveries", err)
}

// FinishDelivery records an attempt: its outcome (pending to retry, or a final status), the
// answer's HTTP status and the error.
func (s *Store) FinishDelivery(ctx context.Context, id uint64, status string, httpStatus int, lastErr string, at time.Time) error {
	if len(lastErr) > 500 {
		lastErr = lastErr[:500]
	}
	upd := map[string]any{"status": status, "attempts": gorm.Expr("attempts + 1"), "last_status": httpStatus,
		"last_error": lastErr, "updated_at": at}
	if status != models.DeliveryPending {
		upd["done_at"] = at
	}
	return mapErr("finish delivery", s.db.WithContext(ctx).Model(&models.Delivery{}).Where("id = ?", id).Updates(upd).Error)
}

// ReopenDelivery puts a failed (or skipped) delivery back to pending, for a retry by hand.
func (s *Store) ReopenDelivery(ctx context.Context, id, endpointID uint64, at time.Time) (models.Delivery, error) {
	res := s.db.WithContext(ctx).Model(&models.Delivery{}).Where("id = ? AND endpoint_id = ? AND status <> ?", id, endpointID, models.DeliverySucceeded).
		Updates(map[string]any{"status": models.DeliveryPending, "done_at": nil, "updated_at": at})
	if res.Error != nil {
		return models.Delivery{}, mapErr("reopen delivery", res.Error)
	}
	d, err := s.Delivery(ctx, id)
	if err == nil && (d.EndpointID != endpointID) {
		return d, errNotFound
	}
	return d, err
}

// DeliveryQuery selects an endpoint's deliveries, newest first.
type DeliveryQuery struct {
	EndpointID uint64
	Status     string
	BeforeID   uint64
	Limit      int
}

// Deliveries lists deliveries matching q.
func (s *Store) Deliveries(ctx context.Context, q DeliveryQuery) ([]models.Delivery, error) {
	db := s.db.WithContext(ctx).Where("endpoint_id = ?", q.EndpointID).Order("id DESC").Limit(q.Limit)
	if q.Status != "" {
		db = db.Where("status = ?", q.Status)
	}
	if q.BeforeID != 0 {
		db = db.Where("id < ?", q.BeforeID)
	}
	var rows []models.Delivery
	return rows, mapErr("list deliveries", db.Find(&rows).Error)
}

// CreateEndpoint stores a webhook endpoint.
func (s *Store) CreateEndpoint(ctx context.Context, e *models.WebhookEndpoint) error {
	return mapErr("create webhook", s.db.WithContext(ctx).Create(e).Error)
}

// Endpoints lists the endpoints not deleted.
func (s *Store) Endpoints(ctx context.Context) ([]models.WebhookEndpoint, error) {
	var rows []models.WebhookEndpoint
	return rows, mapErr("list webhooks", s.db.WithContext(ctx).Where("deleted_at IS NULL").Order("id").Find(&rows).Error)
}

// Endpoint reads one endpoint, deleted or not.
func (s *Store) Endpoint(ctx context.Context, id uint64) (models.WebhookEndpoint, error) {
	var e models.WebhookEndpoint
	return e, mapErr("read webhook", s.db.WithContext(ctx).First(&e, id).Error)
}

// DeleteEndpoint marks an endpoint deleted and skips what still waited for it.
func (s *Store) DeleteEndpoint(ctx context.Context, id uint64, at time.Time) error {
	return s.tx(ctx, "delete webhook", func(tx *gorm.DB) error {
		res := tx.Model(&models.WebhookEndpoint{}).Where("id = ? AND deleted_at IS NULL", id).Update("deleted_at", at)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return errNotFound
		}
		return tx.Model(&models.Delivery{}).Where("endpoint_id = ? AND status = ?", id, models.DeliveryPending).
			Updates(map[string]any{"status": models.DeliverySkipped, "done_at": at, "updated_at": at, "last_error": "endpoint deleted"}).Error
	})
}

// SetTemplate stores the WeChat template of an event type.
func (s *Store) SetTemplate(ctx context.Context, t models.WechatTemplate) error {
	return mapErr("set template", s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&t).Error)
}

// Templates lists the WeChat templates by event type.
func (s *Store) Templates(ctx context.Context) (map[string]models.WechatTemplate, error) {
	var rows []models.WechatTemplate
	if err := s.db.WithContext(ctx).Find(&rows).Error; err != nil {
		return nil, mapErr("list templates", err)
	}
	out := make(map[string]models.WechatTemplate, len(rows))
	for _, r := range rows {
		out[r.EventType] = r
	}
	return out, nil
}

// Prune deletes what the retention no longer needs: deliveries finished before done (failed ones
// before failed), and published events before done that no delivery waits for.
func (s *Store) Prune(ctx context.Context, done, failed time.Time) (int64, error) {
	var total int64
	res := s.db.WithContext(ctx).Where("(status IN ? AND done_at < ?) OR (status = ? AND done_at < ?)",
		[]string{models.DeliverySucceeded, models.DeliverySkipped}, done.UTC(), models.DeliveryFailed, failed.UTC()).
		Delete(&models.Delivery{})
	if res.Error != nil {
		return 0, mapErr("prune deliveries", res.Error)
	}
	total += res.RowsAffected
	res = s.db.WithContext(ctx).Where("published_at < ? AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = outbox_events.id)", done.UTC()).
		Delete(&models.OutboxEvent{})
	total += res.RowsAffected
	return total, mapErr("prune events", res.Error)
}

// IsNotFound reports a missing row.
func IsNotFound(err error) bool { return errors.Is(err, errNotFound) }

// StalePending lists deliveries pending since before at (their task may have been lost with Redis).
func (s *Store) StalePending(ctx context.Context, before time.Time, limit int) ([]uint64, error) {
	var ids []uint64
	return ids, mapErr("stale deliveries", s.db.WithContext(ctx).Model(&models.Delivery{}).
		Where("status = ? AND updated_at < ?", models.DeliveryPending, before.UTC()).Order("id").Limit(limit).Pluck("id", &ids).Error)
}
