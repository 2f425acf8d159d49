package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/catalog"
	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/engine/detach"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/engine/wechatpay"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
)

// Payments owns confirming a hold into a booking, WeChat Pay, refunds and the capacity ledger
// (confirm.go, wechatpay.go, refunds.go, ledger.go).
type Payments struct {
	ss     *sqlstore.Store
	rs     *redisstore.Store
	cat    *catalog.Cache
	events *events
	sched  release.Scheduler
	hooks  *testHooks
	clock  clock.Clock
	log    *slog.Logger

	confirmStaleAfter time.Duration     // Options.ConfirmStaleAfter
	refunds           RefundProvider    // Options.Refunds
	wechatPay         *wechatpay.Client // Options.WechatPay

	// rebuilds are the rebuilds of venues' Redis state that ledger refusals asked for.
	rebuilds rebuilds

	// What payments use of the other services.
	bookings interface {
		view(ctx context.Context, b *booking.Booking) (booking.Booking, error)
		setTimers(b *sqlstore.Booking, now time.Time)
		scheduleIfDue(ctx context.Context, b *sqlstore.Booking)
		giveBack(ctx context.Context, b *sqlstore.Booking)
	}
	catalog interface {
		graceFor(ctx context.Context, ri *catalog.ResourceInfo, start time.Time) (time.Duration, error)
	}
	holds interface {
		readHold(ctx context.Context, id string) (*redisstore.HoldRecord, error)
		viewHold(ctx context.Context, r *redisstore.HoldRecord) booking.Hold
		loadDayField(ctx context.Context, dayField string) error
	}
	upkeep interface {
		repairVenue(ctx context.Context, v uint64, rep *ReconcileReport) error
	}
}

// PaymentNotice is a verified payment notification from the provider.
type PaymentNotice struct {
	HoldID      string
	PaymentID   string
	AmountCents int64
	PaidAt      time.Time
	// Provider took the money: models.ProviderNotify (the default) or models.ProviderWechatPay, whose
	// refunds the engine can request itself.
	Provider string

	user string // the hold's owner, when its record was read
}

// PaymentResult says what a payment became: a booking, or a refund because the hold expired and its
// units were taken.
type PaymentResult struct {
	Outcome   string
	PaymentID string
	HoldID    string
	Booking   *booking.Booking
}

// Payment outcomes.
const (
	OutcomeBooked = "booked"
	OutcomeRefund = "refund"
)

// Confirm turns a hold into a booking without a payment (dev payments). Owner or admin. A hold that
// expired re-takes its units if they are still free; otherwise ErrHoldExpired. Confirming a hold
// that is already a booking answers that booking.
func (ps *Payments) Confirm(ctx context.Context, a booking.Actor, holdID string) (booking.Booking, error) {
	r, err := ps.holds.readHold(ctx, holdID)
	if errors.Is(err, booking.ErrNotFound) {
		b, ok, err := ps.ss.BookingByHold(ctx, holdID)
		if err != nil {
			return booking.Booking{}, err
		}
		if !ok || !a.MayChange(b.UserID) {
			return booking.Booking{}, booking.ErrNotFound
		}
		return ps.bookings.view(ctx, &b.Booking)
	}
	if err != nil {
		return booking.Booking{}, err
	}
	if !a.MayChange(r.UserID) {
		return booking.Booking{}, booking.ErrNotFound
	}
	b, err := ps.confirm(ctx, r, nil)
	switch {
	case errors.Is(err, errUnitsGone):
		return booking.Booking{}, booking.ErrHoldExpired
	case errors.Is(err, errLedgerRefused):
		return booking.Booking{}, ErrSoldOut
	}
	return b, err
}

// errUnitsGone: the hold expired (or was given up) and its units were taken by someone else.
var errUnitsGone = errors.New("units gone")

// Pay records a verified payment notification. A repeated payment_id is answered as the first time;
// one used before for another hold is ErrPaymentIDConflict. A payment for a hold whose units are gone
// (or for a hold already paid by another payment) is recorded for refund and answered with the
// refund outcome, since providers retry anything but 2xx.
func (ps *Payments) Pay(ctx context.Context, n PaymentNotice) (PaymentResult, error) {
	if n.PaymentID == "" || len(n.PaymentID) > booking.MaxPaymentIDLen {
		return PaymentResult{}, booking.Invalid("invalid_payment_id", "payment_id must be 1 to %d characters", booking.MaxPaymentIDLen).WithField("payment_id")
	}
	if err := booking.CheckRange(booking.FieldAmountCents, n.AmountCents); err != nil {
		return PaymentResult{}, err
	}
	if prev, ok, err := ps.ss.PaymentByID(ctx, n.PaymentID); err != nil || ok {
		if err != nil {
			return PaymentResult{}, err
		}
		return ps.answerPayment(ctx, n, prev)
	}
	r, err := ps.holds.readHold(ctx, n.HoldID)
	if errors.Is(err, booking.ErrNotFound) {
		// No hold record (paid already, over a day old, or lost with Redis): nothing to book; the
		// money is kept for refund unless this payment made the booking.
		return ps.paymentForHold(ctx, n)
	}
	if err != nil {
		return PaymentResult{}, err
	}
	n.user = r.UserID
	if n.AmountCents != r.AmountCents {
		return PaymentResult{}, booking.ErrAmountMismatch
	}
	b, err := ps.confirm(ctx, r, &n)
	switch {
	case errors.Is(err, booking.ErrConfirmInProgress), errors.Is(err, errPaymentTaken):
		// The same notification, delivered twice at once: answer as the first one will.
		return ps.awaitPayment(ctx, n)
	case errors.Is(err, errUnitsGone):
		return ps.recordPayment(ctx, n, nil, booking.RefundLatePayment)
	case errors.Is(err, errLedgerRefused):
		// Paid for units MySQL counts as sold: acknowledged, and refunded like a late payment (the
		// refusal's transaction recorded the payment for refund).
		return PaymentResult{Outcome: OutcomeRefund, PaymentID: n.PaymentID, HoldID: n.HoldID}, nil
	case err != nil:
		return PaymentResult{}, err
	case b.PaymentID != n.PaymentID:
		// Paid twice: the booking belongs to the first payment, this one is refunded.
		return ps.recordPayment(ctx, n, nil, booking.RefundDuplicate)
	}
	return PaymentResult{Outcome: OutcomeBooked, PaymentID: n.PaymentID, HoldID: n.HoldID, Booking: &b}, nil
}

// errPaymentTaken: a concurrent notification with the same payment_id committed first.
var errPaymentTaken = errors.New("payment id taken")

// answerPayment answers a payment_id seen before as it was answered then. If it made a booking whose
// hold is still waiting to be settled (the commit's acknowledgement was lost), it is settled now.
func (ps *Payments) answerPayment(ctx context.Context, n PaymentNotice, p sqlstore.Payment) (PaymentResult, error) {
	if p.HoldID != n.HoldID {
		return PaymentResult{}, booking.ErrPaymentIDConflict
	}
	res := PaymentResult{Outcome: OutcomeRefund, PaymentID: p.PaymentID, HoldID: p.HoldID}
	if p.BookingID == 0 {
		return res, nil
	}
	b, err := ps.ss.Booking(ctx, p.BookingID)
	if err != nil {
		return PaymentResult{}, err
	}
	if p.Booked {
		res.Outcome = OutcomeBooked
		ps.settlePending(ctx, &b)
	}
	out, err := ps.bookings.view(ctx, &b.Booking)
	res.Booking = &out
	return res, err
}

// awaitPayment waits (bounded) for a concurrent confirm of the same hold to commit, then answers as
// it did. There is no signal across instances, so it polls the payment row.
func (ps *Payments) awaitPayment(ctx context.Context, n PaymentNotice) (PaymentResult, error) {
	t := time.NewTicker(25 * time.Millisecond)
	defer t.Stop()
	for range 200 {
		if prev, ok, err := ps.ss.PaymentByID(ctx, n.PaymentID); err != nil || ok {
			if err != nil {
				return PaymentResult{}, err
			}
			return ps.answerPayment(ctx, n, prev)
		}
		if b, ok, err := ps.ss.BookingByHold(ctx, n.HoldID); err != nil || ok {
			if err != nil {
				return PaymentResult{}, err
			}
			return ps.recordPayment(ctx, n, &b, booking.RefundDuplicate)
		}
		select {
		case <-ctx.Done():
			return PaymentResult{}, errors.Join(booking.ErrStorageUnavailable, ctx.Err())
		case <-t.C:
		}
	}
	return PaymentResult{}, booking.ErrConfirmInProgress
}

// paymentForHold records a payment against whatever booking its hold became: booked if this payment
// made it, refund otherwise (no booking, or one paid by another payment).
func (ps *Payments) paymentForHold(ctx context.Context, n PaymentNotice) (PaymentResult, error) {
	b, ok, err := ps.ss.BookingByHold(ctx, n.HoldID)
	if err != nil {
		return PaymentResult{}, err
	}
	if !ok {
		return ps.recordPayment(ctx, n, nil, booking.RefundLatePayment)
	}
	return ps.recordPayment(ctx, n, &b, booking.RefundDuplicate)
}

// recordPayment stores a payment that did not make a booking of its own — refunded in full, for
// reason — or one for a booking found afterwards; a concurrent duplicate keeps the first row.
func (ps *Payments) recordPayment(ctx context.Context, n PaymentNotice, b *sqlstore.Booking, reason string) (PaymentResult, error) {
	p := sqlstore.Payment{PaymentID: n.PaymentID, HoldID: n.HoldID, AmountCents: n.AmountCents, PaidAt: n.PaidAt.UTC(),
		At: ps.clock.Now(), Provider: n.Provider, RefundReason: reason, UserID: n.user}
	p.VenueID, _ = redisstore.HoldVenue(n.HoldID)
	if b != nil {
		p.UserID = b.UserID
		if b.PaymentID == n.PaymentID {
			p.Booked, p.BookingID = true, b.ID
		}
	}
	got, err := ps.ss.RecordPayment(ctx, p)
	if err != nil {
		return PaymentResult{}, err
	}
	if !got.Booked {
		metricConfirms.WithLabelValues("refund").Inc()
		ps.log.Warn("payment recorded for refund", "payment_id", n.PaymentID, "hold_id", n.HoldID)
	}
	return ps.answerPayment(ctx, n, got)
}

// confirm runs docs/DESIGN.md's order: mark the hold confirming in Redis (the wheel can no longer
// expire it), commit the booking to SQL, then settle the hold. Units go back only when the booking
// was certainly not committed; a commit whose outcome is unknown leaves the hold CONFIRMING, and
// the sweep settles it once SQL can tell.
func (ps *Payments) confirm(ctx context.Context, r *redisstore.HoldRecord, pay *PaymentNotice) (booking.Booking, error) {
	now := ps.clock.Now()
	if st := r.Effective(now); (st == booking.HoldHeld || st == booking.HoldExpired || st == booking.HoldCancelled) && !r.End.After(now) {
		// The slot is over: a booking of it is worth nothing, so the payment is refunded.
		if b, ok, err := ps.booked(ctx, r.ID); err != nil || ok {
			return b, err
		}
		return booking.Booking{}, errUnitsGone
	}
	for attempt := 0; ; attempt++ {
		st, err := ps.rs.MarkConfirming(ctx, r, ps.clock.Now(), pay != nil, ps.confirmStaleAfter)
		if err != nil {
			return booking.Booking{}, err
		}
		switch st.Outcome {
		case "ok", "retaken":
			if st.Outcome == "retaken" {
				metricConfirms.WithLabelValues("retaken").Inc()
			}
			return ps.commitBooking(ctx, r, pay)
		case "confirmed":
			b, err := ps.ss.Booking(ctx, st.BookingID)
			if err != nil {
				return booking.Booking{}, err
			}
			return ps.bookings.view(ctx, &b.Booking)
		case "busy":
			// Another request is committing this hold right now, or it committed and its
			// acknowledgement was lost: the booking row answers which.
			if b, ok, err := ps.ss.BookingByHold(ctx, r.ID); err != nil || ok {
				if err != nil {
					return booking.Booking{}, err
				}
				ps.settle(ctx, r, &b)
				return ps.bookings.view(ctx, &b.Booking)
			}
			return booking.Booking{}, booking.ErrConfirmInProgress
		case "missing":
			// The record went since it was read: a concurrent confirm settled it into its booking.
			if b, ok, err := ps.booked(ctx, r.ID); err != nil || ok {
				return b, err
			}
			return booking.Booking{}, booking.ErrNotFound
		case "cancelled":
			if r.Refused {
				return booking.Booking{}, errLedgerRefused // ended because its units were sold: the same answer
			}
			return booking.Booking{}, booking.ErrHoldNotActive
		case "gone":
			if b, ok, err := ps.booked(ctx, r.ID); err != nil || ok {
				return b, err
			}
			return booking.Booking{}, errUnitsGone
		case "cold":
			if attempt >= 10 {
				return booking.Booking{}, redisstore.Unexpected("confirm: day would not load")
			}
			if err := ps.holds.loadDayField(ctx, st.Detail); err != nil {
				return booking.Booking{}, err
			}
		default:
			return booking.Booking{}, redisstore.Unexpected("mark confirming: unexpected answer " + st.Outcome)
		}
	}
}

// booked answers the booking a hold became, if any.
func (ps *Payments) booked(ctx context.Context, holdID string) (booking.Booking, bool, error) {
	b, ok, err := ps.ss.BookingByHold(ctx, holdID)
	if err != nil || !ok {
		return booking.Booking{}, false, err
	}
	out, err := ps.bookings.view(ctx, &b.Booking)
	return out, err == nil, err
}

// confirmTimeout bounds a confirm's commit, so that a hold CONFIRMING for longer than
// ConfirmStaleAfter can only belong to a dead process (or a commit whose outcome was lost).
const confirmTimeout = 5 * time.Second

func (ps *Payments) commitBooking(ctx context.Context, r *redisstore.HoldRecord, pay *PaymentNotice) (booking.Booking, error) {
	if ps.hooks.beforeCommit != nil {
		if err := ps.hooks.beforeCommit(r.ID); err != nil {
			if !errors.Is(err, errSimulatedCrash) {
				ps.unconfirm(ctx, r)
			}
			return booking.Booking{}, err
		}
	}
	ri, err := ps.cat.Resource(ctx, r.ResourceID)
	if err != nil {
		ps.unconfirm(ctx, r)
		return booking.Booking{}, err
	}
	grace, err := ps.catalog.graceFor(ctx, ri, r.Start)
	if err != nil {
		ps.unconfirm(ctx, r)
		return booking.Booking{}, err
	}
	now := ps.clock.Now()
	status, releaseAt := booking.Open(ri.Policy, r.Start, r.End, now, grace)
	b := &sqlstore.Booking{Booking: booking.Booking{HoldID: r.ID, UserID: r.UserID, VenueID: r.VenueID,
		ResourceID: r.ResourceID, ServiceID: r.ServiceID, Quantity: r.Quantity, Status: status, Version: 1,
		Start: r.Start, End: r.End, OccupyStart: r.OccupyStart, OccupyEnd: r.OccupyEnd,
		ReleaseAt: releaseAt, ConfirmedAt: now, AmountCents: r.AmountCents, Roles: r.Roles},
		Fields: r.Fields}
	created := booking.Transition{From: booking.Status(booking.HoldHeld), To: status}
	nb := sqlstore.NewBooking{Booking: b, Code: newCheckinCode,
		Change:  booking.Change{From: created.From, To: created.To, At: now},
		Refusal: ps.refusal(ctx, r, pay, now)}
	if pay != nil {
		b.PaymentID = pay.PaymentID
		nb.Payment = &sqlstore.Payment{PaymentID: pay.PaymentID, HoldID: r.ID, AmountCents: pay.AmountCents, PaidAt: pay.PaidAt.UTC(), At: now,
			Provider: pay.Provider}
	}
	ps.bookings.setTimers(b, now)
	commitCtx, cancel := context.WithTimeout(ctx, confirmTimeout)
	defer cancel()
	err = ps.ss.CreateBooking(commitCtx, nb)
	if ps.hooks.afterCommit != nil && (err == nil || errors.Is(err, sqlstore.ErrCommitUnknown)) {
		if herr := ps.hooks.afterCommit(r.ID); errors.Is(herr, errSimulatedCrash) {
			return booking.Booking{}, herr
		} else if herr != nil {
			err = herr
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, sqlstore.ErrHoldBooked):
		// Another confirm of this hold won (a stale CONFIRMING taken over): answer its booking.
		return ps.settleExisting(ctx, r)
	case errors.Is(err, sqlstore.ErrPaymentTaken):
		ps.unconfirm(ctx, r)
		return booking.Booking{}, errPaymentTaken
	case errors.Is(err, sqlstore.ErrOverCapacity):
		return booking.Booking{}, ps.refuseConfirm(ctx, r, err)
	case errors.Is(err, sqlstore.ErrCommitUnknown):
		// The acknowledgement of COMMIT was lost. Giving the units back now could sell them twice if
		// the booking did commit: find out, and while SQL cannot tell, leave the hold CONFIRMING.
		metricConfirms.WithLabelValues("unknown").Inc()
		ps.log.Warn("booking commit outcome unknown; resolving from SQL", "hold_id", r.ID, "err", err)
		if b, rerr := ps.settleExisting(ctx, r); rerr == nil {
			return b, nil
		}
		return booking.Booking{}, errors.Join(booking.ErrStorageUnavailable, err)
	default:
		metricConfirms.WithLabelValues("failed").Inc()
		ps.unconfirm(ctx, r)
		return booking.Booking{}, err
	}
	metricConfirms.WithLabelValues("booked").Inc()
	countTransition(created)
	ps.settle(ctx, r, b)
	ps.bookings.scheduleIfDue(ctx, b)
	return ps.bookings.view(ctx, &b.Booking)
}

// settleExisting answers the booking a hold already became, settling the hold; ErrNotFound when
// SQL (answering) has none.
func (ps *Payments) settleExisting(ctx context.Context, r *redisstore.HoldRecord) (booking.Booking, error) {
	lctx, cancel := detach.Later(ctx)
	defer cancel()
	b, ok, err := ps.ss.BookingByHold(lctx, r.ID)
	if err != nil {
		return booking.Booking{}, err
	}
	if !ok {
		return booking.Booking{}, booking.ErrNotFound
	}
	ps.settle(lctx, r, &b)
	return ps.bookings.view(ctx, &b.Booking)
}

// settle hands the hold's units to its booking (and back, when the booking no longer occupies: it
// was released or cancelled before its hold was settled). A failure here leaves the hold CONFIRMING
// with its booking committed, which the sweep and reconciliation settle; the booking itself is safe.
func (ps *Payments) settle(ctx context.Context, r *redisstore.HoldRecord, b *sqlstore.Booking) {
	lctx, cancel := detach.Later(ctx)
	defer cancel()
	if _, err := ps.rs.Settle(lctx, r, b.ID, b.Version); err != nil {
		ps.log.Error("settle hold failed; the sweep will settle it", "hold_id", r.ID, "booking_id", b.ID, "err", err)
		return
	}
	if !b.Status.Occupies() {
		ps.bookings.giveBack(lctx, b)
	}
}

// settlePending settles a booking's hold if its record is still waiting (its commit's
// acknowledgement was lost, or the process died before settling).
func (ps *Payments) settlePending(ctx context.Context, b *sqlstore.Booking) {
	if r, ok, err := ps.rs.ReadHold(ctx, b.HoldID); err == nil && ok && r.Status == booking.HoldConfirming {
		ps.settle(ctx, &r, b)
	}
}

// unconfirm puts a hold whose commit certainly failed back on the wheel.
func (ps *Payments) unconfirm(ctx context.Context, r *redisstore.HoldRecord) {
	lctx, cancel := detach.Later(ctx)
	defer cancel()
	if err := ps.rs.Unconfirm(lctx, r, ps.clock.Now()); err != nil {
		ps.log.Error("unconfirm hold failed; the sweep will put it back", "hold_id", r.ID, "err", err)
	}
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

// The metrics of this file (engine.go says why they are package-level).
var (
	metricConfirms = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_confirms_total", Help: "Confirms by outcome (booked, retaken, refund, refused: the capacity ledger refused the booking, failed, unknown: the commit's acknowledgement was lost).",
	}, []string{"outcome"})
)

// Every label value is registered up front (engine.go says why).
func init() {
	for _, o := range []string{"booked", "retaken", "refund", "refused", "failed", "unknown"} {
		metricConfirms.WithLabelValues(o)
	}
}
