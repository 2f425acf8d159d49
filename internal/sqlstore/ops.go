package sqlstore

import (
	"context"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/sqlstore/sqldb"
	"github.com/slotwheel/slotwheel/models"
)

// The reads of the back office's operations page: what falls due, what failed, what the capacity
// ledger found wrong. Each is one indexed query, bounded by limit.

// Ops is the operations page's reads.
type Ops struct{ db *sqldb.DB }

// Failures counts the refunds and webhook deliveries that gave up (status failed).
func (s *Ops) Failures(ctx context.Context) (refunds, deliveries int64, err error) {
	if err := s.db.WithContext(ctx).Model(&models.Refund{}).Where("status = ?", models.RefundFailed).Count(&refunds).Error; err != nil {
		return 0, 0, sqldb.MapErr("failed refunds", err)
	}
	err = s.db.WithContext(ctx).Model(&models.Delivery{}).Where("status = ?", models.DeliveryFailed).Count(&deliveries).Error
	return refunds, deliveries, sqldb.MapErr("failed deliveries", err)
}

// OverCapacity lists slots from from on whose ledger counts more units than they have (a capacity
// lowered under bookings by hand, or a bug): the ledger never raises a slot past its capacity.
func (s *Ops) OverCapacity(ctx context.Context, from time.Time, limit int) ([]models.SlotInventory, error) {
	var rows []models.SlotInventory
	err := s.db.WithContext(ctx).Where("start >= ? AND occupied > capacity", from.UTC()).Order("start").Limit(limit).Find(&rows).Error
	return rows, sqldb.MapErr("slots over capacity", err)
}

// RefusedByLedger lists the refunds since since of payments the capacity ledger refused (Redis had
// let a hold through on units MySQL counted as sold), newest first.
func (s *Ops) RefusedByLedger(ctx context.Context, since time.Time, limit int) ([]models.Refund, error) {
	var rows []models.Refund
	err := s.db.WithContext(ctx).Where("reason = ? AND created_at >= ?", booking.RefundCapacity, since.UTC()).
		Order("id DESC").Limit(limit).Find(&rows).Error
	return rows, sqldb.MapErr("refunds the ledger caused", err)
}
