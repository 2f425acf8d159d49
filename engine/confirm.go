package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/slotwheel/slotwheel/models"
)

// Confirm turns a hold into a booking without a payment (dev payments). Owner or admin. A hold that
// expired re-takes its units if they are still free; otherwise ErrHoldExpired.
func (e *Engine) Confirm(ctx context.Context, a Actor, holdID string) (Booking, error) {
	r, err := e.readHold(ctx, holdID)
	if err != nil {
		return Booking{}, err
	}
	if !r.visibleTo(a) {
		return Booking{}, ErrNotFound
	}
	b, err := e.confirm(ctx, r, nil)
	if errors.Is(err, errUnitsGone) {
		return Booking{}, ErrHoldExpired
	}
	return b, err
}

// errUnitsGone: the hold expired (or was given up) and its units were taken by someone else.
var errUnitsGone = errors.New("units gone")

// Pay records a verified payment notification. A repeated payment_id is answered as the first time;
// a payment for a hold whose units are gone (or for a hold already paid by another payment) is
// recorded for refund and answered with the refund outcome, since providers retry anything but 2xx.
func (e *Engine) Pay(ctx context.Context, n PaymentNotice) (PaymentResult, error) {
	if n.PaymentID == "" || len(n.PaymentID) > 128 {
		return PaymentResult{}, Invalid("invalid_payment_id", "payment_id must be 1 to 128 characters")
	}
	if n.AmountCents < 0 {
		return PaymentResult{}, Invalid("invalid_amount", "amount_cents must not be negative")
	}
	if prev, ok, err := e.paymentResult(ctx, n.PaymentID); err != nil || ok {
		return prev, err
	}
	r, err := e.readHold(ctx, n.HoldID)
	if errors.Is(err, ErrNotFound) {
		// The hold record is gone (more than 24 h, or Redis lost it): nothing to book, keep the money
		// for refund unless a booking exists for it.
		return e.paymentForHold(ctx, n)
	}
	if err != nil {
		return PaymentResult{}, err
	}
	if n.AmountCents != r.AmountCents {
		return PaymentResult{}, ErrAmountMismatch
	}
	b, err := e.confirm(ctx, r, &n)
	if errors.Is(err, ErrConfirmInProgress) {
		// The same notification, delivered twice at once: answer as the first one will.
		return e.awaitPayment(ctx, n)
	}
	switch {
	case errors.Is(err, errUnitsGone):
		return e.recordPayment(ctx, n, nil)
	case err != nil:
		return PaymentResult{}, err
	case b.PaymentID != n.PaymentID:
		// Paid twice: the booking belongs to the first payment, this one is refunded.
		return e.recordPayment(ctx, n, nil)
	}
	return PaymentResult{Outcome: OutcomeBooked, PaymentID: n.PaymentID, HoldID: n.HoldID, Booking: &b}, nil
}

// awaitPayment waits (bounded) for a concurrent confirm of the same hold to commit, then answers as
// it did. There is no signal across instances, so it polls the payment row.
func (e *Engine) awaitPayment(ctx context.Context, n PaymentNotice) (PaymentResult, error) {
	t := time.NewTicker(25 * time.Millisecond)
	defer t.Stop()
	for i := 0; i < 200; i++ {
		if prev, ok, err := e.paymentResult(ctx, n.PaymentID); err != nil || ok {
			return prev, err
		}
		if b, ok, err := e.bookingByHold(ctx, n.HoldID); err != nil || ok {
			if err != nil {
				return PaymentResult{}, err
			}
			return e.recordPayment(ctx, n, &b)
		}
		select {
		case <-ctx.Done():
			return PaymentResult{}, backendErr("await payment", ctx.Err())
		case <-t.C:
		}
	}
	return PaymentResult{}, ErrConfirmInProgress
}

// paymentForHold records a payment against whatever booking its hold became: booked if this payment
// made it, refund otherwise (no booking, or one paid by another payment).
func (e *Engine) paymentForHold(ctx context.Context, n PaymentNotice) (PaymentResult, error) {
	b, ok, err := e.bookingByHold(ctx, n.HoldID)
	if err != nil {
		return PaymentResult{}, err
	}
	if !ok {
		return e.recordPayment(ctx, n, nil)
	}
	return e.recordPayment(ctx, n, &b)
}

// paymentResult answers a payment_id seen before as it was answered then.
func (e *Engine) paymentResult(ctx context.Context, paymentID string) (PaymentResult, bool, error) {
	var p models.Payment
	err := e.db.WithContext(ctx).First(&p, "payment_id = ?", paymentID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return PaymentResult{}, false, nil
	}
	if err != nil {
		return PaymentResult{}, false, backendErr("read payment", err)
	}
	res := PaymentResult{Outcome: p.Outcome, PaymentID: p.PaymentID, HoldID: p.HoldID}
	if p.BookingID != nil {
		b, err := e.bookingByID(ctx, *p.BookingID)
		if err != nil {
			return PaymentResult{}, false, err
		}
		res.Booking = &b
	}
	return res, true, nil
}

// recordPayment stores a payment that did not make a booking of its own (refund), or one for a
// booking found afterwards; a concurrent duplicate keeps the first row.
func (e *Engine) recordPayment(ctx context.Context, n PaymentNotice, b *Booking) (PaymentResult, error) {
	p := models.Payment{PaymentID: n.PaymentID, HoldID: n.HoldID, AmountCents: n.AmountCents, PaidAt: n.PaidAt.UTC(),
		Outcome: models.PaymentRefund, CreatedAt: e.clock.Now()}
	if b != nil && b.PaymentID == n.PaymentID {
		p.Outcome, p.BookingID = models.PaymentBooked, &b.ID
	}
	if err := e.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&p).Error; err != nil {
		return PaymentResult{}, backendErr("record payment", err)
	}
	if p.Outcome == models.PaymentRefund {
		metricConfirms.WithLabelValues("refund").Inc()
		e.log.Warn("payment recorded for refund", "payment_id", n.PaymentID, "hold_id", n.HoldID)
	}
	prev, _, err := e.paymentResult(ctx, n.PaymentID)
	return prev, err
}

// confirm runs DESIGN.md's order: mark the hold confirming in Redis (the wheel can no longer expire
// it), commit the booking to SQL, then settle the hold. If the commit fails the hold goes back on the
// wheel; if the process dies in between, reconciliation settles or re-queues the hold.
func (e *Engine) confirm(ctx context.Context, r *holdRecord, pay *PaymentNotice) (Booking, error) {
	v := r.VenueID
	k := e.keys
	hk := k.Hold(v, r.ID)
	allowRevive := "0"
	if pay != nil {
		allowRevive = "1"
	}
	if (r.Status == HoldHeld || r.Status == HoldExpired || r.Status == HoldCancelled) && !r.End.After(e.clock.Now()) {
		// The slot is over: a booking of it is worth nothing, so the payment is refunded.
		if b, ok, err := e.bookingByHold(ctx, r.ID); err != nil || ok {
			return b, err
		}
		return Booking{}, errUnitsGone
	}
	for attempt := 0; ; attempt++ {
		now := e.clock.Now()
		out, err := reply(e.scripts.markConfirming.Run(ctx, e.rdb,
			[]string{k.Capacity(v), k.Used(v), k.Owners(v), k.Wheel(v), k.Days(v), hk, k.Confirming(v)},
			now.UnixMilli(), keep.Milliseconds(), k.HoldPrefix(v), allowRevive, e.opts.ConfirmStaleAfter.Milliseconds(),
			strings.Join(r.days, ",")).Result())
		if err != nil {
			return Booking{}, backendErr("mark confirming", err)
		}
		switch out[0] {
		case "ok", "retaken":
			return e.commitBooking(ctx, r, pay, out[0] == "retaken")
		case "confirmed":
			id, _ := strconv.ParseUint(out[1], 10, 64)
			return e.bookingByID(ctx, id)
		case "busy":
			// Another request is committing this hold right now, or it committed and died before
			// settling: the booking row answers which.
			if b, ok, err := e.bookingByHold(ctx, r.ID); err != nil || ok {
				return b, err
			}
			return Booking{}, ErrConfirmInProgress
		case "missing":
			return Booking{}, ErrNotFound
		case "cancelled":
			return Booking{}, ErrHoldNotActive
		case "gone":
			if b, ok, err := e.bookingByHold(ctx, r.ID); err != nil || ok {
				return b, err
			}
			return Booking{}, errUnitsGone
		case "cold":
			ri, err := e.resource(ctx, r.ResourceID)
			if err != nil {
				return Booking{}, err
			}
			if attempt >= 3 {
				return Booking{}, backendErr("confirm", errors.New("day would not load"))
			}
			if err := e.loadDay(ctx, ri, dayOfField(out[1])); err != nil {
				return Booking{}, err
			}
		default:
			return Booking{}, fmt.Errorf("mark confirming: unexpected answer %q", out[0])
		}
	}
}

// confirmTimeout bounds a confirm's commit, so that a hold CONFIRMING for longer than
// ConfirmStaleAfter can only belong to a dead process.
const confirmTimeout = 5 * time.Second

func (e *Engine) commitBooking(ctx context.Context, r *holdRecord, pay *PaymentNotice, retaken bool) (Booking, error) {
	if e.hooks.beforeCommit != nil {
		if err := e.hooks.beforeCommit(r.ID); err != nil {
			if !errors.Is(err, errSimulatedCrash) {
				e.unconfirm(ctx, r)
			}
			return Booking{}, err
		}
	}
	ri, err := e.resource(ctx, r.ResourceID)
	if err != nil {
		e.unconfirm(ctx, r)
		return Booking{}, err
	}
	now := e.clock.Now()
	grace, err := e.graceFor(ctx, ri.res.Category, r.Start, ri.venue.loc)
	if err != nil {
		e.unconfirm(ctx, r)
		return Booking{}, err
	}
	// A slot bought after it started still gets its grace.
	releaseAt := maxTime(r.Start, now).Add(grace)
	b := models.Booking{HoldID: r.ID, UserID: r.UserID, VenueID: r.VenueID, ResourceID: r.ResourceID, Quantity: r.Quantity,
		Start: r.Start.UTC(), End: r.End.UTC(), OccupyStart: r.OccupyStart.UTC(), OccupyEnd: r.OccupyEnd.UTC(),
		Slots: joinFields(r.fields), Status: models.StatusConfirmed, Version: 1, ReleaseAt: releaseAt.UTC(), ConfirmedAt: now.UTC(),
		AmountCents: r.AmountCents, CreatedAt: now, UpdatedAt: now}
	if r.ServiceID != 0 {
		sid := r.ServiceID
		b.ServiceID = &sid
	}
	if pay != nil {
		pid := pay.PaymentID
		b.PaymentID = &pid
	}
	commitCtx, cancel := context.WithTimeout(ctx, confirmTimeout)
	defer cancel()
	err = e.tx(commitCtx, func(tx *gorm.DB) error {
		var err error
		for i := 0; i < 5; i++ {
			b.CheckinCode = newCheckinCode()
			if err = tx.Create(&b).Error; err == nil || !isDuplicate(err) || strings.Contains(err.Error(), "hold") {
				break
			}
			// A check-in code collision: draw another.
		}
		if err != nil {
			return err
		}
		if err := writeHistory(tx, b.ID, "HELD", models.StatusConfirmed, 1, "system", "confirmed", now); err != nil {
			return err
		}
		if pay != nil {
			if err := tx.Create(&models.Payment{PaymentID: pay.PaymentID, HoldID: r.ID, BookingID: &b.ID, AmountCents: pay.AmountCents,
				PaidAt: pay.PaidAt.UTC(), Outcome: models.PaymentBooked, CreatedAt: now}).Error; err != nil {
				return err
			}
		}
		return writeEvent(tx, b.ID, "booking.confirmed", now, map[string]any{"retaken": retaken})
	})
	if err != nil {
		if isDuplicate(err) {
			// Another confirm of this hold won (a stale CONFIRMING taken over): answer its booking.
			if existing, ok, lerr := e.bookingByHold(ctx, r.ID); lerr == nil && ok {
				e.settle(ctx, r, existing.ID)
				return existing, nil
			}
		}
		metricConfirms.WithLabelValues("failed").Inc()
		e.unconfirm(ctx, r)
		return Booking{}, backendErr("commit booking", err)
	}
	metricConfirms.WithLabelValues("booked").Inc()
	if e.hooks.afterCommit != nil {
		if err := e.hooks.afterCommit(r.ID); err != nil {
			return Booking{}, err
		}
	}
	e.settle(ctx, r, b.ID)
	e.scheduleIfDue(ctx, b)
	out, err := e.toBooking(ctx, b)
	return out, err
}

// settle hands the hold's units to the booking. A failure here leaves the hold CONFIRMING with its
// booking committed, which reconciliation settles; the booking itself is safe.
func (e *Engine) settle(ctx context.Context, r *holdRecord, bookingID uint64) {
	v := r.VenueID
	k := e.keys
	err := e.scripts.settleHold.Run(ctx, e.rdb, []string{k.Owners(v), k.Used(v), k.Hold(v, r.ID), k.Wheel(v), k.Gone(v), k.Confirming(v)},
		HoldOwner(r.ID), BookingOwner(bookingID), bookingID, e.clock.Now().UnixMilli(), keep.Milliseconds(),
		r.Quantity, joinFields(r.fields)).Err()
	if err != nil {
		e.log.Error("settle hold failed; reconciliation will settle it", "hold_id", r.ID, "booking_id", bookingID, "err", err)
	}
}

// unconfirm puts a hold whose commit failed back on the wheel.
func (e *Engine) unconfirm(ctx context.Context, r *holdRecord) {
	v := r.VenueID
	err := e.scripts.unconfirm.Run(context.WithoutCancel(ctx), e.rdb, []string{e.keys.Wheel(v), e.keys.Hold(v, r.ID), e.keys.Confirming(v)},
		keep.Milliseconds(), e.clock.Now().UnixMilli()).Err()
	if err != nil {
		e.log.Error("unconfirm hold failed; reconciliation will re-queue it", "hold_id", r.ID, "err", err)
	}
}

// scheduleIfDue queues the release task when release_at is already within the horizon; later ones
// wait in SQL for the loader.
func (e *Engine) scheduleIfDue(ctx context.Context, b models.Booking) {
	if e.sched == nil || b.ReleaseAt.Sub(e.clock.Now()) > e.opts.ReleaseHorizon {
		return
	}
	ref := ReleaseRef{BookingID: b.ID, ReleaseAt: b.ReleaseAt}
	if err := e.sched.ScheduleRelease(ctx, ref); err != nil {
		e.log.Error("schedule release failed; the loader will retry", "booking_id", b.ID, "err", err)
		return
	}
	if err := e.MarkReleaseQueued(ctx, []ReleaseRef{ref}); err != nil {
		e.log.Warn("mark release queued failed", "booking_id", b.ID, "err", err)
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// checkinAlphabet leaves out letters and digits that staff misread (0/O, 1/I/L).
const checkinAlphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"

func newCheckinCode() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = checkinAlphabet[int(b[i])%len(checkinAlphabet)]
	}
	return string(b)
}

func isDuplicate(err error) bool {
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "Duplicate entry") || strings.Contains(s, "UNIQUE constraint failed")
}
