package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/detach"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
)

// Redis is the fast gate of holds and MySQL's capacity ledger the arbiter of what is sold (see
// sqlstore's ledger.go). Redis replication is asynchronous: after a failover that lost writes, Redis
// may count units that bookings own as free and let holds through on them. The ledger refuses those
// holds' bookings; this file carries out what a refusal means — the hold ends, a payment is
// refunded, the user and the webhooks hear of it — and rebuilds the venue's Redis state from MySQL,
// since a refusal is proof that Redis fell behind.

// errLedgerRefused: the capacity ledger refused a hold's booking; the hold has been ended.
var errLedgerRefused = errors.New("the capacity ledger refused the booking")

// ErrSoldOut answers a dev confirm the ledger refused: the slot is sold out (the stable code of a
// full slot), and the hold is over.
var ErrSoldOut = &booking.Error{Kind: booking.KindConflict, Code: booking.ErrSlotFull.Code,
	Message: "the units of the hold were sold to another booking; the hold has ended"}

// refusal is what a confirm of r commits if the ledger refuses its booking: hold.refused, and a
// payment (pay, when set) kept for refund in full.
func (ps *Payments) refusal(ctx context.Context, r *redisstore.HoldRecord, pay *PaymentNotice, now time.Time) sqlstore.Refusal {
	h := ps.holds.viewHold(ctx, r)
	h.Status = booking.HoldCancelled
	out := sqlstore.Refusal{Event: ps.events.holdEvent(booking.EventHoldRefused, h, now)}
	if pay != nil {
		out.Payment = &sqlstore.Payment{PaymentID: pay.PaymentID, HoldID: r.ID, AmountCents: pay.AmountCents, PaidAt: pay.PaidAt.UTC(),
			At: now, Provider: pay.Provider, RefundReason: booking.RefundCapacity, UserID: r.UserID, VenueID: r.VenueID}
	}
	return out
}

// refuseConfirm ends a hold whose booking the ledger refused (cause; the refusal's transaction
// recorded its event and the payment's refund): its units go back in Redis and its record says
// CANCELLED, and the venue is rebuilt from MySQL.
func (ps *Payments) refuseConfirm(ctx context.Context, r *redisstore.HoldRecord, cause error) error {
	metricConfirms.WithLabelValues("refused").Inc()
	ps.log.Warn("the capacity ledger refused a booking: Redis let its hold through on units MySQL counts as sold; "+
		"ending the hold and rebuilding the venue from MySQL", "hold_id", r.ID, "venue_id", r.VenueID, "err", cause)
	lctx, cancel := detach.Later(ctx)
	defer cancel()
	if out, err := ps.rs.RefuseHold(lctx, r, redisstore.RefuseConfirming, ps.clock.Now()); err != nil || out != "refused" {
		ps.log.Error("end a refused hold failed; the sweep will", "hold_id", r.ID, "answer", out, "err", err)
	}
	ps.rebuildVenueSoon(r.VenueID)
	return errLedgerRefused
}

// announceRefused writes hold.refused for holds that ended because their units were sold.
func (ps *Payments) announceRefused(ctx context.Context, rs []*redisstore.HoldRecord) {
	now := ps.clock.Now()
	evs := make([]sqlstore.Event, 0, len(rs))
	for _, r := range rs {
		evs = append(evs, ps.refusal(ctx, r, nil, now).Event)
	}
	if err := ps.ss.InsertEvents(ctx, evs); err != nil {
		ps.log.Warn("announce refused holds failed", "holds", len(rs), "err", err)
	}
}

// refuseOverfull ends live holds on the venue's slots that hold more units than they have (fields):
// after Redis lost writes its counters may have let holds through on units that bookings own, and
// none of those holds could be paid for. The youngest holds go first, each only while one of its
// slots is still over (the script checks, atomically), and each is announced.
func (ps *Payments) refuseOverfull(ctx context.Context, venueID uint64, fields []string) (int, error) {
	if len(fields) == 0 {
		return 0, nil
	}
	st, err := ps.rs.ReadVenueState(ctx, venueID)
	if err != nil {
		return 0, err
	}
	now := ps.clock.Now()
	var holds []*redisstore.HoldRecord
	for o, u := range st.Owners {
		id, ok := o.Hold()
		r, found := st.Holds[id]
		if !ok || !found || r.Effective(now) != booking.HoldHeld || !slices.ContainsFunc(u.Fields, func(f string) bool { return slices.Contains(fields, f) }) {
			continue
		}
		holds = append(holds, &r)
	}
	slices.SortFunc(holds, func(a, b *redisstore.HoldRecord) int { return b.Created.Compare(a.Created) })
	var refused []*redisstore.HoldRecord
	var errs []error
	for _, r := range holds {
		out, err := ps.rs.RefuseHold(ctx, r, redisstore.RefuseOverfull, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if out == "refused" {
			refused = append(refused, r)
			ps.closeOrderOf(ctx, r.ID, r.OrderNo)
		}
	}
	if len(refused) > 0 {
		ps.log.Warn("ended holds on slots Redis counted over their capacity (Redis had lost writes)",
			"venue_id", venueID, "slots", fields, "holds", len(refused))
		ps.announceRefused(ctx, refused)
	}
	return len(refused), errors.Join(errs...)
}

// rebuilds coalesces the rebuilds of venues' Redis state that refusals ask for: a venue being
// rebuilt is rebuilt once more after the current run if asked again meanwhile, however often.
type rebuilds struct {
	mu      sync.Mutex
	running map[uint64]bool // venue → a rebuild runs; true: another is asked for after it
	wg      sync.WaitGroup
}

// rebuildVenueSoon rebuilds a venue's Redis state from MySQL in the background, at once (see
// rebuilds).
func (ps *Payments) rebuildVenueSoon(venueID uint64) {
	rb := &ps.rebuilds
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if rb.running == nil {
		rb.running = map[uint64]bool{}
	}
	if _, ok := rb.running[venueID]; ok {
		rb.running[venueID] = true
		return
	}
	rb.running[venueID] = false
	rb.wg.Add(1)
	go func() {
		defer rb.wg.Done()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), rebuildTimeout)
			var rep ReconcileReport
			err := ps.upkeep.repairVenue(ctx, venueID, &rep)
			cancel()
			countRepairs(rep)
			if err != nil {
				ps.log.Error("rebuild of a venue's Redis state failed; reconciliation will repeat it", "venue_id", venueID, "err", err)
			} else {
				ps.log.Info("rebuilt a venue's Redis state from MySQL", "venue_id", venueID, "report", rep)
			}
			rb.mu.Lock()
			again := rb.running[venueID]
			if !again {
				delete(rb.running, venueID)
				rb.mu.Unlock()
				return
			}
			rb.running[venueID] = false
			rb.mu.Unlock()
		}
	}()
}

// rebuildTimeout bounds one rebuild of a venue.
const rebuildTimeout = 30 * time.Second

// WaitRebuilds waits for the venue rebuilds under way (tests, and a graceful stop).
func (ps *Payments) WaitRebuilds() { ps.rebuilds.wg.Wait() }

// LedgerReport is what a check of the capacity ledger found (see CheckLedger).
type LedgerReport = sqlstore.LedgerReport

// CheckLedger counts the capacity ledger of db from its bookings (`slotwheel migrate` runs it): a
// slot whose count differs is set to what its occupying bookings take, and slots whose bookings take
// more units than they have are reported, never hidden.
func CheckLedger(ctx context.Context, db *gorm.DB) (LedgerReport, error) {
	return sqlstore.New(db, nil).CheckLedger(ctx, nil, time.Time{})
}

// checkLedger checks the capacity ledger against the bookings (sqlstore.CheckLedger), repairing a
// count that drifted, and reports every slot whose occupying bookings take more units than it has:
// counted in rep, logged with the bookings, exported as slotwheel_slots_over_capacity. It looks at
// the slots from a day ago on: what is over can no longer be sold, and an oversell found once stays
// in the logs and the alert's history rather than paging for ever (`slotwheel migrate` checks
// every slot).
func (ps *Payments) checkLedger(ctx context.Context, rep *ReconcileReport) error {
	lr, err := ps.ss.CheckLedger(ctx, nil, ps.clock.Now().Add(-24*time.Hour))
	if err != nil {
		return err
	}
	rep.LedgerRepaired += len(lr.Repaired)
	rep.SlotsOverCapacity = len(lr.Over)
	metricSlotsOver.Set(float64(len(lr.Over)))
	for _, sl := range lr.Repaired {
		ps.log.Warn("capacity ledger repaired: its count differed from the bookings", "slot", sl.Field, "ledger", sl.Occupied,
			"bookings", sl.Booked)
	}
	for _, sl := range lr.Over {
		ps.log.Error("slot over capacity: its bookings take more units than it has", "slot", sl.Field, "capacity", sl.Capacity,
			"units", sl.Booked, "booking_ids", sl.Bookings)
	}
	for _, sl := range lr.Missing {
		ps.log.Warn("occupying bookings on a slot that has no inventory row", "slot", sl.Field, "booking_ids", sl.Bookings)
	}
	return nil
}

// The metrics of this file (engine.go says why they are package-level).
var (
	metricSlotsOver = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "slotwheel_slots_over_capacity", Help: "Slots whose occupying bookings take more units than the slot has, as this instance's last check of the capacity ledger found them: an oversell.",
	})
	metricLedgerDrift = promauto.NewCounter(prometheus.CounterOpts{
		Name: "slotwheel_ledger_drift_total", Help: "Slots whose capacity-ledger count was short of the units a booking change gave back (repaired by reconciliation's check of the ledger).",
	})
)
