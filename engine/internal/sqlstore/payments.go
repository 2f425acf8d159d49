package sqlstore

import (
	"context"
	"errors"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/slotwheel/slotwheel/models"
)

func paymentRow(p *Payment) *models.Payment {
	r := &models.Payment{PaymentID: p.PaymentID, HoldID: p.HoldID, AmountCents: p.AmountCents, PaidAt: p.PaidAt.UTC(),
		Outcome: models.PaymentRefund, CreatedAt: p.At}
	if p.Booked {
		id := p.BookingID
		r.BookingID, r.Outcome = &id, models.PaymentBooked
	}
	return r
}

func toPayment(r *models.Payment) Payment {
	p := Payment{PaymentID: r.PaymentID, HoldID: r.HoldID, AmountCents: r.AmountCents, PaidAt: r.PaidAt.UTC(),
		Booked: r.Outcome == models.PaymentBooked, At: r.CreatedAt.UTC()}
	if r.BookingID != nil {
		p.BookingID = *r.BookingID
	}
	return p
}

// PaymentByID reads a payment notification seen before.
func (s *Store) PaymentByID(ctx context.Context, paymentID string) (Payment, bool, error) {
	var r models.Payment
	err := s.db.WithContext(ctx).First(&r, "payment_id = ?", paymentID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Payment{}, false, nil
	}
	if err != nil {
		return Payment{}, false, mapErr("read payment", err)
	}
	return toPayment(&r), true, nil
}

// RecordPayment stores a payment that made no booking of its own (kept for refund), or one for a
// booking found afterwards; a concurrent duplicate keeps the first row, which it answers.
func (s *Store) RecordPayment(ctx context.Context, p Payment) (Payment, error) {
	if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(paymentRow(&p)).Error; err != nil {
		return Payment{}, mapErr("record payment", err)
	}
	got, _, err := s.PaymentByID(ctx, p.PaymentID)
	return got, err
}
