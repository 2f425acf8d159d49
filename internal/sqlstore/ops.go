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

// DueBetween lists the bookings whose release (or approval deadline) is undecided and due in
// [from, to), of one venue when venueID != 0, soonest first.
func (s *Releases) DueBetween(ctx context.Context, venueID uint64, from, to time.Time, limit int) ([]Booking, error) {
	db := s.db.WithContext(ctx).Where("due_at >= ? AND due_at < ?", from.UTC(), to.UTC()).Order("due_at").Limit(limit)
	if venueID != 0 {
		db = db.Where("venue_id = ?", venueID)
	}
	var rows []models.Booking
	if err := db.Find(&rows).Error; err != nil {
		return nil, sqldb.MapErr("due between", err)
	}
	out := make([]Booking, len(rows))
	for i := range rows {
		out[i] = toBooking(&rows[i])
	}
	return out, nil
}

// Failures counts the refunds and webhook deliveries that gave up (status failed).
func (s *Releases) Failures(ctx context.Context) (refunds, deliveries int64, err error) {
	if err := s.db.WithContext(ctx).Model(&models.Refund{}).Where("status = ?", models.RefundFailed).Count(&refunds).Error; err != nil {
		return 0, 0, sqldb.MapErr("failed refunds", err)
	}
	err = s.db.WithContext(ctx).Model(&models.Delivery{}).Where("status = ?", models.DeliveryFailed).Count(&deliveries).Error
	return refunds, deliveries, sqldb.MapErr("failed deliveries", err)
}

// OverCapacity lists slots from from on whose ledger counts more units than they have (a capacity
// lowered under bookings by hand, or a bug): the ledger never raises a slot past its capacity.
func (s *Releases) OverCapacity(ctx context.Context, from time.Time, limit int) ([]models.SlotInventory, error) {
	var rows []models.SlotInventory
	err := s.db.WithContext(ctx).Where("start >= ? AND occupied > capacity", from.UTC()).Order("start").Limit(limit).Find(&rows).Error
	return rows, sqldb.MapErr("slots over capacity", err)
}

// RefusedByLedger lists the refunds since since of payments the capacity ledger refused (Redis had
// let a hold through on units MySQL counted as sold), newest first.
func (s *Releases) RefusedByLedger(ctx context.Context, since time.Time, limit int) ([]models.Refund, error) {
	var rows []models.Refund
	err := s.db.WithContext(ctx).Where("reason = ? AND created_at >= ?", booking.RefundCapacity, since.UTC()).
		Order("id DESC").Limit(limit).Find(&rows).Error
	return rows, sqldb.MapErr("refunds the ledger caused", err)
}
