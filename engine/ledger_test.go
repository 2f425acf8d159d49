package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/models"
)

// ledger reads the capacity ledger's count of one slot.
func (tb *testBundle) ledger(t testing.TB, resourceID uint64, start time.Time) int {
	t.Helper()
	var row models.SlotInventory
	require.NoError(t, tb.db.Gorm.Where("resource_id = ? AND start = ?", resourceID, start.UTC()).First(&row).Error)
	return row.Occupied
}

// snapshotRedis copies every key of a venue; the answer puts them back as they were, dropping what
// was written since — what a Redis failover to a replica that lagged does to the writes it missed.
// (The embedded Redis DUMPs strings only, so the keys are copied by type.)
func (tb *testBundle) snapshotRedis(t testing.TB, venueID uint64) (rollback func()) {
	t.Helper()
	ctx := context.Background()
	rdb := tb.redis.Client
	pattern := tb.e.rs.Keys().VenuePattern(venueID)
	keys, err := rdb.Keys(ctx, pattern).Result()
	require.NoError(t, err)
	var put []func(p redis.Pipeliner)
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		require.NoError(t, err)
		ttl, err := rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		switch typ {
		case "hash":
			m, err := rdb.HGetAll(ctx, k).Result()
			require.NoError(t, err)
			put = append(put, func(p redis.Pipeliner) { p.HSet(ctx, k, m) })
		case "zset":
			zs, err := rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
			require.NoError(t, err)
			put = append(put, func(p redis.Pipeliner) { p.ZAdd(ctx, k, zs...) })
		case "set":
			ms, err := rdb.SMembers(ctx, k).Result()
			require.NoError(t, err)
			put = append(put, func(p redis.Pipeliner) { p.SAdd(ctx, k, ms) })
		case "string":
			v, err := rdb.Get(ctx, k).Result()
			require.NoError(t, err)
			put = append(put, func(p redis.Pipeliner) { p.Set(ctx, k, v, 0) })
		default:
			t.Fatalf("snapshot: key %s is a %s", k, typ)
		}
		if ttl > 0 {
			put = append(put, func(p redis.Pipeliner) { p.PExpire(ctx, k, ttl) })
		}
	}
	return func() {
		t.Helper()
		now, err := rdb.Keys(ctx, pattern).Result()
		require.NoError(t, err)
		_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			if len(now) > 0 {
				p.Del(ctx, now...)
			}
			for _, f := range put {
				f(p)
			}
			return nil
		})
		require.NoError(t, err)
	}
}

// hour holds a's one-hour slot at start; the hold must be let through.
func (tb *testBundle) hour(t testing.TB, a booking.Actor, res Resource, start time.Time) booking.Hold {
	t.Helper()
	h, err := tb.e.Hold(context.Background(), HoldRequest{UserID: a.UserID, ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.NoError(t, err)
	return h
}

var bob = booking.Actor{UserID: "bob", Role: booking.RoleUser}

// Redis rolled back past a confirmed booking (a failover to a replica that had not received it):
// its counters show the slot free again and let another hold through, but MySQL's ledger refuses the
// second booking. The hold ends with its units back, hold.refused tells the user, and the venue's
// Redis is rebuilt from MySQL so that the next hold is refused at the gate.
func TestLedgerRefusesWhatRedisForgot(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	start := at("14:00")
	tb.slotOf(t, res.ID, start) // the day is in Redis before the writes the failover loses
	rollback := tb.snapshotRedis(t, res.VenueID)

	kept := tb.book(t, alice, res, start)
	require.Equal(t, 1, tb.ledger(t, res.ID, start))
	rollback()
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, start), "Redis forgot the booking")

	h := tb.hour(t, bob, res, start) // Redis lets it through
	_, err := tb.e.Confirm(ctx, bob, h.ID)
	require.ErrorIs(t, err, booking.ErrSlotFull)
	require.ErrorIs(t, err, ErrSoldOut)
	require.Equal(t, 1, tb.ledger(t, res.ID, start), "nothing more was sold")
	var n int64
	require.NoError(t, tb.db.Gorm.Model(&models.Booking{}).Where("resource_id = ?", res.ID).Count(&n).Error)
	require.EqualValues(t, 1, n, "only the first booking is in MySQL")

	got, err := tb.e.GetHold(ctx, bob, h.ID)
	require.NoError(t, err)
	require.Equal(t, booking.HoldCancelled, got.Status, "the refused hold ended")
	require.Equal(t, []string{"hold:" + h.ID}, tb.events(t, booking.EventHoldRefused))

	tb.e.WaitRebuilds()
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, start), "the venue was rebuilt from MySQL")
	require.Contains(t, tb.owners(t, res.VenueID), string(redisstore.BookingOwner(kept.ID)))
	_, err = tb.e.Hold(ctx, HoldRequest{UserID: "carol", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.ErrorIs(t, err, booking.ErrSlotFull, "the gate holds again")
}

// A payment for a hold the ledger refuses is acknowledged and refunded in full through the durable
// refund path, and both the refusal and the refund are announced.
func TestRefusedPaymentIsRefunded(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	start := at("15:00")
	tb.slotOf(t, res.ID, start)
	rollback := tb.snapshotRedis(t, res.VenueID)
	tb.payFor(t, alice, res, start, "pay-alice")
	rollback()

	h := tb.hour(t, bob, res, start)
	p, err := tb.e.Pay(ctx, PaymentNotice{HoldID: h.ID, PaymentID: "pay-bob", AmountCents: h.AmountCents, PaidAt: tb.clock.Now()})
	require.NoError(t, err, "the provider hears success")
	require.Equal(t, OutcomeRefund, p.Outcome)
	rs := tb.refunds(t)
	require.Len(t, rs, 1)
	require.Equal(t, "pay-bob", rs[0].PaymentID)
	require.Equal(t, booking.RefundCapacity, rs[0].Reason)
	require.Equal(t, h.AmountCents, rs[0].AmountCents, "refunded in full")
	require.Equal(t, models.RefundRequested, rs[0].Status)
	require.Equal(t, []string{"hold:" + h.ID}, tb.events(t, booking.EventHoldRefused))
	require.Len(t, tb.events(t, booking.EventRefundReq), 1)

	again, err := tb.e.Pay(ctx, PaymentNotice{HoldID: h.ID, PaymentID: "pay-bob", AmountCents: h.AmountCents, PaidAt: tb.clock.Now()})
	require.NoError(t, err)
	require.Equal(t, OutcomeRefund, again.Outcome, "the same notification again is answered as the first time")
	require.Len(t, tb.refunds(t), 1, "and refunds nothing twice")
	require.Equal(t, 1, tb.ledger(t, res.ID, start))
}

// Redis, behind, let a thousand holds through on a slot of ten units: their confirms race, and
// MySQL's ledger lets exactly ten of them become bookings. A confirm that answers 503 (the database
// too busy within the commit's timeout, as under the race detector on two cores) is asked again, as
// a client would. It runs alone (not parallel): a thousand transactions at once on two cores would
// starve the package's other races of the database.
func TestLedgerSettlesARaceForTheLastUnits(t *testing.T) {
	tb := setup(t, func(o *Options) { o.MaxActiveHolds = 0 })
	ctx := context.Background()
	res := tb.resource(t, 10, 60, "08:00", "22:00")
	start := at("16:00")
	tb.slotOf(t, res.ID, start)
	field := redisstore.SlotField(res.ID, start.Unix()/60)
	const racers = 1000
	// Redis believes the slot is a hundred times larger than MySQL knows it to be.
	require.NoError(t, tb.redis.Client.HSet(ctx, tb.e.rs.Keys().Venue(res.VenueID).Capacity(), field, racers).Err())
	holds := make([]booking.Hold, racers)
	for i := range holds {
		holds[i] = tb.hour(t, booking.Actor{UserID: fmt.Sprintf("u%d", i), Role: booking.RoleUser}, res, start)
	}
	var booked, refused atomic.Int64
	var others sync.Map
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i, h := range holds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			var err error
			for range 5 {
				_, err = tb.e.Confirm(ctx, booking.Actor{UserID: fmt.Sprintf("u%d", i), Role: booking.RoleUser}, h.ID)
				if !errors.Is(err, booking.ErrStorageUnavailable) {
					break
				}
			}
			switch {
			case err == nil:
				booked.Add(1)
			case errors.Is(err, booking.ErrSlotFull):
				refused.Add(1)
			default:
				others.Store(i, err)
			}
		}()
	}
	close(gate)
	wg.Wait()
	others.Range(func(k, v any) bool { t.Errorf("confirm %v: %v", k, v); return false })
	require.EqualValues(t, 10, booked.Load(), "exactly the capacity is sold")
	require.EqualValues(t, racers-10, refused.Load())
	require.Equal(t, 10, tb.ledger(t, res.ID, start))
	var n int64
	require.NoError(t, tb.db.Gorm.Model(&models.Booking{}).Where("resource_id = ? AND status = ?", res.ID, booking.Confirmed).Count(&n).Error)
	require.EqualValues(t, 10, n)
	require.Equal(t, racers-10, len(tb.events(t, booking.EventHoldRefused)), "every refused hold is announced")
	tb.e.WaitRebuilds()
	require.Equal(t, 10, tb.used(t, res.VenueID, res.ID, start), "Redis counts the ten bookings, and no refused hold")
}

// Every booking change that takes or gives units moves the ledger in its own transaction: a confirm
// takes, a cancel, a release and a completion give back, a restore and a late check-in take again,
// and a reschedule moves the units from the old window to the new one.
func TestLedgerFollowsEveryTransition(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 10 * time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 2, 60, "08:00", "22:00")
	eleven, noon := at("11:00"), at("12:00")

	b := tb.book(t, alice, res, eleven)
	require.Equal(t, 1, tb.ledger(t, res.ID, eleven))
	_, err := tb.e.CancelBooking(ctx, alice, b.ID)
	require.NoError(t, err)
	require.Equal(t, 0, tb.ledger(t, res.ID, eleven), "a cancel gives back")

	b = tb.book(t, alice, res, eleven)
	moved, err := tb.e.Reschedule(ctx, alice, RescheduleRequest{BookingID: b.ID, Start: noon, End: noon.Add(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, 0, tb.ledger(t, res.ID, eleven), "a move gives back the old window")
	require.Equal(t, 1, tb.ledger(t, res.ID, noon), "and takes the new one")

	tb.clock.Set(moved.ReleaseAt)
	n, err := tb.e.ReleaseDue(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 0, tb.ledger(t, res.ID, noon), "a release gives back")
	_, err = tb.e.Restore(ctx, alice, b.ID)
	require.NoError(t, err)
	require.Equal(t, 1, tb.ledger(t, res.ID, noon), "a restore takes again")

	staff := booking.Actor{UserID: "desk", Role: booking.RoleStaff, VenueID: res.VenueID}
	got, err := tb.e.GetBooking(ctx, alice, b.ID)
	require.NoError(t, err)
	_, err = tb.e.CheckIn(ctx, staff, got.CheckinCode)
	require.NoError(t, err)
	require.Equal(t, 1, tb.ledger(t, res.ID, noon), "a check-in in time keeps the units")
	tb.clock.Set(noon.Add(time.Hour))
	require.NoError(t, tb.e.completeFinished(ctx))
	require.Equal(t, 0, tb.ledger(t, res.ID, noon), "a completed booking gives back")
}

// A slot whose bookings already take more than its capacity (sold before the ledger existed, or
// written behind slotwheel's back) is counted as it is, reported by reconciliation — logged with
// the bookings, exported, and refusing further sales — never hidden or "repaired" to fit.
func TestReconcileReportsASlotOverCapacity(t *testing.T) {
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	start := at("17:00")
	first := tb.book(t, alice, res, start)
	var row models.Booking
	require.NoError(t, tb.db.Gorm.First(&row, first.ID).Error)
	row.ID, row.HoldID, row.CheckinCode, row.UserID = 0, "h_before_the_ledger", "OVERSOLD", "bob"
	require.NoError(t, tb.db.Gorm.Create(&row).Error, "a second booking of the only unit, written around the ledger")

	rep, err := tb.e.Reconcile(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.SlotsOverCapacity)
	require.Equal(t, 1, rep.LedgerRepaired, "the ledger counts both bookings")
	require.Equal(t, 2, tb.ledger(t, res.ID, start))
	require.Equal(t, 1.0, gaugeValue(metricSlotsOver))
	require.Equal(t, 2, tb.used(t, res.VenueID, res.ID, start), "Redis counts what MySQL has, over capacity as it is")
	_, err = tb.e.Hold(ctx, HoldRequest{UserID: "carol", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.ErrorIs(t, err, booking.ErrSlotFull)

	_, err = tb.e.CancelBooking(ctx, booking.Actor{UserID: "ops", Role: booking.RoleAdmin}, first.ID)
	require.NoError(t, err)
	rep, err = tb.e.Reconcile(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.SlotsOverCapacity)
	require.Zero(t, rep.LedgerRepaired)
	require.Equal(t, 1, tb.ledger(t, res.ID, start))
	require.Equal(t, 0.0, gaugeValue(metricSlotsOver))
}

// After a failover that lost writes, Redis may have let holds through on units that bookings own: the
// rebuild from MySQL ends those holds (the youngest first, until the slot fits) and announces them,
// and settles a hold whose confirm committed in MySQL although Redis forgot it.
func TestRebuildEndsHoldsOnSoldUnits(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 2, 60, "08:00", "22:00")
	start := at("18:00")
	tb.slotOf(t, res.ID, start)
	h := tb.hour(t, alice, res, start)
	rollback := tb.snapshotRedis(t, res.VenueID) // alice's hold is HELD in the snapshot
	b, err := tb.e.Confirm(ctx, alice, h.ID)
	require.NoError(t, err)
	tb.book(t, booking.Actor{UserID: "dan", Role: booking.RoleUser}, res, start)
	rollback() // Redis forgot dan's booking and that alice's hold became a booking

	tb.clock.Advance(time.Second)
	carol := tb.hour(t, booking.Actor{UserID: "carol", Role: booking.RoleUser}, res, start) // let through on dan's unit
	rep, err := tb.e.RepairCounters(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.HoldsRefused)
	require.Equal(t, 1, rep.HoldsSettled, "alice's hold is settled into her booking")
	got, err := tb.e.GetHold(ctx, booking.Actor{UserID: "carol", Role: booking.RoleUser}, carol.ID)
	require.NoError(t, err)
	require.Equal(t, booking.HoldCancelled, got.Status)
	_, err = tb.e.Confirm(ctx, booking.Actor{UserID: "carol", Role: booking.RoleUser}, carol.ID)
	require.ErrorIs(t, err, ErrSoldOut, "a confirm of the ended hold hears why, as one the ledger refused")
	require.Equal(t, []string{"hold:" + carol.ID}, tb.events(t, booking.EventHoldRefused))
	require.Equal(t, 2, tb.used(t, res.VenueID, res.ID, start))
	require.ElementsMatch(t, []string{string(redisstore.BookingOwner(b.ID)), string(redisstore.BookingOwner(b.ID + 1))},
		tb.owners(t, res.VenueID))
	require.Equal(t, 2, tb.ledger(t, res.ID, start))
}

func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		panic(err)
	}
	return m.GetGauge().GetValue()
}

// A Redis primary replaced by a replica that lagged is noticed by its identity (run_id), and Redis
// is rebuilt from MySQL at once: the booking the failover lost is counted again, before any hold is
// let through on its unit.
func TestFailoverIsNoticedAndRepaired(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	id, err := tb.e.rs.Identity(ctx)
	require.NoError(t, err)
	if id == "" {
		t.Skip("the embedded Redis has no run_id and cannot fail over; run with SLOTWHEEL_TEST_REDIS_URL")
	}
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	start := at("19:00")
	tb.slotOf(t, res.ID, start)
	require.NoError(t, tb.e.watchPrimary(ctx), "the first look only notes the primary")
	rollback := tb.snapshotRedis(t, res.VenueID)
	b := tb.book(t, alice, res, start)
	rollback()
	require.NoError(t, tb.e.watchPrimary(ctx))
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, start), "the same primary: nothing to notice")

	failovers := counterValue(metricRepairs.WithLabelValues(repairRedisFailover))
	tb.e.primary.Store("the primary before the failover")
	require.NoError(t, tb.e.watchPrimary(ctx))
	require.Equal(t, 1.0, counterValue(metricRepairs.WithLabelValues(repairRedisFailover))-failovers)
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, start), "the forgotten booking is counted again")
	require.Contains(t, tb.owners(t, res.VenueID), string(redisstore.BookingOwner(b.ID)))
	_, err = tb.e.Hold(ctx, HoldRequest{UserID: "carol", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
	require.ErrorIs(t, err, booking.ErrSlotFull)
}
