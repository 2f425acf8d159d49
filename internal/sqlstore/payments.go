package sqlstore

import (
	"context"
	"errors"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/sqlstore/sqldb"
	"github.com/slotwheel/slotwheel/models"
)

// Payments is the money of bookings: payment notifications, WeChat Pay orders, and refunds, from
// their request (written in the transaction that decides them, see refunds.go) to their
// settlement by the provider.
type Payments struct {
	db           *sqldb.DB
	renderRefund RefundRenderer // nil: refunds announce nothing (SetRefundRenderer)
}

func paymentRow(p *Payment) *models.Payment {
	r := &models.Payment{PaymentID: p.PaymentID, HoldID: p.HoldID, AmountCents: p.AmountCents, PaidAt: p.PaidAt.UTC(),
		Outcome: models.PaymentRefund, Provider: p.Provider, CreatedAt: p.At}
	if r.Provider == "" {
		r.Provider = models.ProviderNotify
	}
	if p.Booked {
		id := p.BookingID
		r.BookingID, r.Outcome = &id, models.PaymentBooked
	}
	return r
}

func toPayment(r *models.Payment) Payment {
	p := Payment{PaymentID: r.PaymentID, HoldID: r.HoldID, AmountCents: r.AmountCents, PaidAt: r.PaidAt.UTC(),
		Booked: r.Outcome == models.PaymentBooked, At: r.CreatedAt.UTC(), Provider: r.Provider}
	if r.BookingID != nil {
		p.BookingID = *r.BookingID
	}
	return p
}

// PaymentByID reads a payment notification seen before.
func (s *Payments) PaymentByID(ctx context.Context, paymentID string) (Payment, bool, error) {
	var r models.Payment
	err := s.db.WithContext(ctx).First(&r, "payment_id = ?", paymentID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Payment{}, false, nil
	}
	if err != nil {
		return Payment{}, false, sqldb.MapErr("read payment", err)
	}
	return toPayment(&r), true, nil
}

// RecordPayment stores a payment that made no booking of its own — with its refund of the whole
// amount, in the same transaction — or one for a booking found afterwards; a concurrent duplicate
// keeps the first row (and its refund), which it answers.
func (s *Payments) RecordPayment(ctx context.Context, p Payment) (Payment, error) {
	err := s.db.Tx(ctx, "record payment", func(tx *gorm.DB) error {
		return s.recordPayment(tx, p)
	})
	if err != nil {
		return Payment{}, sqldb.MapErr("record payment", err)
	}
	got, _, err := s.PaymentByID(ctx, p.PaymentID)
	return got, err
}

// recordPayment is RecordPayment inside tx. CreateBooking records a refused booking's payment (and
// its refund) through it too, in its own transaction.
func (s *Payments) recordPayment(tx *gorm.DB, p Payment) error {
	row := paymentRow(&p)
	res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(row)
	if res.Error != nil || res.RowsAffected == 0 || p.Booked || p.AmountCents <= 0 {
		return res.Error
	}
	reason := p.RefundReason
	if reason == "" {
		reason = booking.RefundLatePayment
	}
	return s.insertRefunds(tx, []models.Refund{{HoldID: p.HoldID, UserID: p.UserID, VenueID: p.VenueID,
		PaymentID: p.PaymentID, Provider: row.Provider,
		PaidCents: p.AmountCents, AmountCents: p.AmountCents, Reason: reason, Status: models.RefundRequested,
		OutRefundNo: paymentRefundNo(p.PaymentID), CreatedAt: p.At, UpdatedAt: p.At}})
}
