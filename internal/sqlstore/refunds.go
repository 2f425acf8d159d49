package sqlstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/sqlstore/sqldb"
	"github.com/slotwheel/slotwheel/models"
)

// Refunds are written in the transaction that decides them — a booking change whose Change carries
// a Refund, or a payment that booked nothing — with their refund.requested event, so that no money
// owed is forgotten and none is owed twice: OutRefundNo, the provider's idempotency key, is derived
// from what caused the refund.

// RefundRenderer renders the event of a refund, as the API shows it.
type RefundRenderer func(r models.Refund, typ string) Event

// RefundSubject is the subject of a refund's events: its booking's, so that a receiver hears of the
// refund after the change that caused it, or its own for a payment that booked nothing.
func RefundSubject(r models.Refund) string {
	if r.BookingID != nil {
		return BookingSubject(*r.BookingID)
	}
	return "refund:" + strconv.FormatUint(r.ID, 10)
}

// bookingRefundNo is the out_refund_no of the refund a booking's change at version decided.
func bookingRefundNo(bookingID uint64, version int) string {
	return "rfb" + strconv.FormatUint(bookingID, 10) + "v" + strconv.Itoa(version)
}

// paymentRefundNo is the out_refund_no of the refund of a payment that booked nothing.
func paymentRefundNo(paymentID string) string {
	sum := sha256.Sum256([]byte(paymentID))
	return "rfp" + hex.EncodeToString(sum[:12])
}

// writeRefunds records the refunds the changes decided, for bookings that were paid: the
// transactions of booking changes (Bookings.writeChanges, writeReleases) write their refunds
// through it.
func (s *Payments) writeRefunds(tx *gorm.DB, cs []changed) error {
	var ids []string
	for _, x := range cs {
		if x.c.Refund != nil && x.b.PaymentID != "" {
			ids = append(ids, x.b.PaymentID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	var pays []models.Payment
	if err := tx.Where("payment_id IN ?", ids).Find(&pays).Error; err != nil {
		return err
	}
	byID := make(map[string]models.Payment, len(pays))
	for _, p := range pays {
		byID[p.PaymentID] = p
	}
	var rows []models.Refund
	for _, x := range cs {
		p, ok := byID[x.b.PaymentID]
		if x.c.Refund == nil || !ok {
			continue
		}
		amount := x.c.Refund.Amount(p.AmountCents)
		if amount <= 0 {
			continue
		}
		id := x.b.ID
		rows = append(rows, models.Refund{BookingID: &id, HoldID: x.b.HoldID, UserID: x.b.UserID, VenueID: x.b.VenueID,
			PaymentID: p.PaymentID, Provider: p.Provider,
			PaidCents: p.AmountCents, AmountCents: amount, Reason: x.c.Refund.Reason, Status: models.RefundRequested,
			OutRefundNo: bookingRefundNo(x.b.ID, x.b.Version), CreatedAt: x.c.At, UpdatedAt: x.c.At})
	}
	return s.insertRefunds(tx, rows)
}

// insertRefunds writes refund rows with their refund.requested events inside tx, and has the commit
// wake the refund loop (see OnRefunds).
func (s *Payments) insertRefunds(tx *gorm.DB, rows []models.Refund) error {
	if len(rows) == 0 {
		return nil
	}
	if err := tx.CreateInBatches(rows, 500).Error; err != nil {
		return err
	}
	sqldb.MarkRefunds(tx)
	if s.renderRefund == nil {
		return nil
	}
	// The ids a multi-row INSERT gave are read back by key: auto-increment values of one statement
	// need not be consecutive (innodb_autoinc_lock_mode 2, TiDB).
	nos := make([]string, len(rows))
	for i, r := range rows {
		nos[i] = r.OutRefundNo
	}
	var got []models.Refund
	if err := tx.Select("id, out_refund_no").Where("out_refund_no IN ?", nos).Find(&got).Error; err != nil {
		return err
	}
	ids := make(map[string]uint64, len(got))
	for _, g := range got {
		ids[g.OutRefundNo] = g.ID
	}
	for i := range rows {
		rows[i].ID = ids[rows[i].OutRefundNo]
	}
	evs := make([]Event, len(rows))
	for i, r := range rows {
		evs[i] = s.renderRefund(r, booking.EventRefundReq)
	}
	return insertEvents(tx, evs)
}

// RefundQuery selects refunds, newest first.
type RefundQuery struct {
	Status string
	Page
}

// Refunds lists refunds matching q: an admin's list, a replica read (see sqldb.DB.StaleRead).
func (s *Payments) Refunds(ctx context.Context, q RefundQuery) ([]models.Refund, error) {
	var rows []models.Refund
	err := s.db.StaleRead(ctx, false, func(db *gorm.DB) error {
		db = newestFirst(db, "refunds", q.Page)
		if q.Status != "" {
			db = db.Where("status = ?", q.Status)
		}
		rows = nil
		return db.Find(&rows).Error
	})
	return rows, sqldb.MapErr("list refunds", err)
}

// Refund reads one refund.
func (s *Payments) Refund(ctx context.Context, id uint64) (models.Refund, error) {
	var r models.Refund
	return r, sqldb.MapErr("read refund", s.db.WithContext(ctx).First(&r, id).Error)
}

// RefundByOutNo reads the refund of an out_refund_no.
func (s *Payments) RefundByOutNo(ctx context.Context, outNo string) (models.Refund, error) {
	var r models.Refund
	return r, sqldb.MapErr("read refund", s.db.WithContext(ctx).First(&r, "out_refund_no = ?", outNo).Error)
}

// RequestedRefunds lists refunds of a provider still requested, oldest first: those never sent yet
// (unsent), or those last touched before before.
func (s *Payments) RequestedRefunds(ctx context.Context, provider string, unsent bool, before time.Time, limit int) ([]models.Refund, error) {
	db := s.db.WithContext(ctx).Where("status = ? AND provider = ?", models.RefundRequested, provider)
	if unsent {
		db = db.Where("provider_refund_id = '' AND last_error = ''")
	} else {
		db = db.Where("updated_at < ?", before.UTC())
	}
	var rows []models.Refund
	return rows, sqldb.MapErr("requested refunds", db.Order("id").Limit(limit).Find(&rows).Error)
}

// RefundSent records what the provider answered a refund request: its refund id, and the error of a
// request it refused (the refund stays requested).
func (s *Payments) RefundSent(ctx context.Context, id uint64, providerID, lastErr string, at time.Time) error {
	if len(lastErr) > 500 {
		lastErr = lastErr[:500]
	}
	upd := map[string]any{"last_error": lastErr, "updated_at": at}
	if providerID != "" {
		upd["provider_refund_id"] = providerID
	}
	return sqldb.MapErr("record refund request", s.db.WithContext(ctx).Model(&models.Refund{}).Where("id = ?", id).Updates(upd).Error)
}

// SettleRefund moves a requested refund to succeeded or failed with its event, once; a refund
// already settled is answered as it is (a provider repeats its notifications).
func (s *Payments) SettleRefund(ctx context.Context, id uint64, status, providerID, lastErr string, at time.Time) (models.Refund, bool, error) {
	var r models.Refund
	changed := false
	err := s.db.Tx(ctx, "settle refund", func(tx *gorm.DB) error {
		changed = false
		upd := map[string]any{"status": status, "updated_at": at, "last_error": lastErr}
		if providerID != "" {
			upd["provider_refund_id"] = providerID
		}
		res := tx.Model(&models.Refund{}).Where("id = ? AND status = ?", id, models.RefundRequested).Updates(upd)
		if res.Error != nil {
			return res.Error
		}
		if err := tx.First(&r, id).Error; err != nil {
			return err
		}
		if res.RowsAffected == 0 || s.renderRefund == nil {
			return nil
		}
		changed = true
		typ := booking.EventRefundOK
		if status == models.RefundFailed {
			typ = booking.EventRefundFailed
		}
		return insertEvents(tx, []Event{s.renderRefund(r, typ)})
	})
	return r, changed, sqldb.MapErr("settle refund", err)
}
