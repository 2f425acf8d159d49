package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
	"github.com/slotwheel/slotwheel/internal/testenv/faultproxy"
	"github.com/slotwheel/slotwheel/models"
)

// owners lists a venue's owners of units in Redis.
func (tb *testBundle) owners(t testing.TB, venueID uint64) []string {
	t.Helper()
	o, err := tb.redis.Client.HKeys(context.Background(), tb.e.rs.Keys().Venue(venueID).Owners()).Result()
	require.NoError(t, err)
	return o
}

// A booking whose COMMIT reached MySQL but whose acknowledgement never came back keeps its units:
// the hold stays CONFIRMING (it cannot expire) until SQL can tell, and a retry — the provider's or
// the owner's — settles the units into the booking. Nobody else can take them meanwhile.
func TestLostCommitAcknowledgementNeverGivesUnitsBack(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.HoldTTL = time.Minute })
	var proxy *faultproxy.Proxy
	if tb.db.MySQL {
		// The engine talks to MySQL through a proxy that can sever a connection after COMMIT.
		proxy = tb.throughProxy(t)
	}
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	start := at("15:00")

	for _, via := range []string{"confirm", "payment"} {
		t.Run(via, func(t *testing.T) {
			start := start
			if via == "payment" {
				start = start.Add(time.Hour)
			}
			h, err := tb.e.Hold(ctx, HoldRequest{UserID: "alice", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
			require.NoError(t, err)
			pay := PaymentNotice{HoldID: h.ID, PaymentID: "p-" + via, AmountCents: h.AmountCents, PaidAt: tb.clock.Now()}
			attempt := func() error {
				if via == "confirm" {
					_, err := tb.e.Confirm(ctx, alice, h.ID)
					return err
				}
				_, err := tb.e.Pay(ctx, pay)
				return err
			}

			// The wheel has been running (its venue list is cached, as in a live process).
			require.NoError(t, tb.e.NewLoops(LoopsConfig{}).Run(ctx, "wheel_sweep"))
			severed := 0
			// The commit happens; its answer is lost, and SQL stays unreachable for a while.
			if proxy != nil {
				severed = proxy.Severed()
				proxy.SeverAfterCommit(1)
				t.Cleanup(func() { proxy.Refuse(false) })
				tb.e.hooks.afterCommit = func(string) error { proxy.Refuse(true); proxy.CutAll(); return nil }
			} else {
				// SQLite has no connection to sever: the commit reports its acknowledgement lost.
				tb.e.hooks.afterCommit = func(string) error {
					return fmt.Errorf("%w: the connection died after COMMIT was sent", sqlstore.ErrCommitUnknown)
				}
			}
			err = attempt()
			tb.e.hooks.afterCommit = nil
			var b sqlstore.Booking
			if proxy != nil {
				require.ErrorIs(t, err, booking.ErrStorageUnavailable, "the outcome is unknown to the caller")
				require.Equal(t, severed+1, proxy.Severed())
				// Time passes beyond the hold's deadline while SQL is away: the hold must not expire.
				tb.clock.Advance(2 * time.Minute)
				// The wheel runs; it cannot resolve the confirm while SQL is away, and says so.
				if err := tb.e.NewLoops(LoopsConfig{}).Run(ctx, "wheel_sweep"); err != nil {
					require.ErrorIs(t, err, booking.ErrStorageUnavailable)
				}
				require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, start), "the units stay taken while the outcome is unknown")
				_, err = tb.e.Hold(ctx, HoldRequest{UserID: "bob", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
				require.ErrorIs(t, err, booking.ErrSlotFull, "nobody else gets the unit the booking owns")
				proxy.Refuse(false)
			} else {
				require.NoError(t, err, "SQL answers at once: the booking is found and settled")
				tb.clock.Advance(2 * time.Minute)
			}
			var ok bool
			b, ok, err = tb.e.ss.BookingByHold(ctx, h.ID)
			require.NoError(t, err)
			require.True(t, ok, "MySQL committed the booking")

			// The retry answers the booking and hands it the units.
			require.NoError(t, attempt())
			require.NoError(t, tb.e.NewLoops(LoopsConfig{}).RunOnce(ctx))
			require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, start))
			require.Contains(t, tb.owners(t, res.VenueID), string(redisstore.BookingOwner(b.ID)), "the booking owns the units")
			require.NotContains(t, tb.owners(t, res.VenueID), string(redisstore.HoldOwner(h.ID)))
			_, err = tb.e.Hold(ctx, HoldRequest{UserID: "carol", ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
			require.ErrorIs(t, err, booking.ErrSlotFull, "still one unit sold of one")
		})
	}
}

// throughProxy rebuilds the engine on a connection to the test's MySQL database through a fault
// proxy the test controls.
func (tb *testBundle) throughProxy(t *testing.T) *faultproxy.Proxy {
	t.Helper()
	cfg, err := mysqldriver.ParseDSN(tb.db.DSN)
	require.NoError(t, err)
	proxy := faultproxy.New(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	g, err := models.OpenMySQL(cfg.FormatDSN(), models.Pool{})
	require.NoError(t, err)
	t.Cleanup(func() {
		if s, err := g.DB(); err == nil {
			_ = s.Close()
		}
	})
	tb.opts.DB = g
	tb.restart(t)
	return proxy
}

// A no-show counts once per released booking: a restore takes it back (and a second release counts
// it again, once), and so does a late check-in.
func TestNoShowCountIsOnePerReleasedBooking(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	staff := booking.Actor{UserID: "desk", Role: booking.RoleStaff, VenueID: res.VenueID}
	count := func() int {
		n, err := tb.e.NoShows(ctx, "alice")
		require.NoError(t, err)
		return n
	}
	b := tb.book(t, alice, res, at("11:00"))
	tb.clock.Set(at("11:15"))
	_, err := tb.e.Release(ctx, release.Ref{BookingID: b.ID, ReleaseAt: b.ReleaseAt})
	require.NoError(t, err)
	require.Equal(t, 1, count())
	tb.clock.Set(at("11:20"))
	restored, err := tb.e.Restore(ctx, alice, b.ID)
	require.NoError(t, err)
	require.Equal(t, 0, count(), "a restore takes the no-show back")
	tb.clock.Set(restored.ReleaseAt.UTC())
	_, err = tb.e.Release(ctx, release.Ref{BookingID: b.ID, ReleaseAt: restored.ReleaseAt})
	require.NoError(t, err)
	require.Equal(t, 1, count(), "released again: one booking, one no-show")
	tb.clock.Advance(time.Minute)
	got, err := tb.e.CheckIn(ctx, staff, b.CheckinCode)
	require.NoError(t, err)
	require.Equal(t, booking.Arrived, got.Status)
	require.Equal(t, 0, count(), "a late arrival is not a no-show")
}

// A restore after the slot ended is refused (it would only produce a second release); so is one
// after the restore window.
func TestRestoreAfterTheSlotEndedIsRefused(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 50 * time.Minute; o.RestoreWindow = 30 * time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	b := tb.book(t, alice, res, at("11:00")) // release_at 11:50, the slot ends at 12:00
	tb.clock.Set(at("11:50"))
	_, err := tb.e.Release(ctx, release.Ref{BookingID: b.ID, ReleaseAt: b.ReleaseAt})
	require.NoError(t, err)
	tb.clock.Set(at("12:00"))
	_, err = tb.e.Restore(ctx, alice, b.ID)
	require.ErrorIs(t, err, booking.ErrRestoreWindowClosed, "the slot is over")
	got, err := tb.e.GetBooking(ctx, alice, b.ID)
	require.NoError(t, err)
	require.Equal(t, booking.Released, got.Status)
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, at("11:00")), "no units taken for a refused restore")
	tb.clock.Set(at("11:59"))
	_, err = tb.e.Restore(ctx, alice, b.ID)
	require.NoError(t, err, "the last minute of the slot is still inside the window")
}

// recordingScheduler remembers what the engine asked of the queue.
type recordingScheduler struct {
	mu        sync.Mutex
	scheduled []release.Ref
	cancelled []release.Ref
}

func (s *recordingScheduler) ScheduleRelease(_ context.Context, r release.Ref) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scheduled = append(s.scheduled, r)
	return true, nil
}

func (s *recordingScheduler) CancelRelease(_ context.Context, r release.Ref) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancelled = append(s.cancelled, r)
	return nil
}

// Reminders go only to bookings still CONFIRMED at their reminder time; a check-in or a cancel
// drops the booking's release task and its reminder.
func TestRemindersOnlyForConfirmedBookings(t *testing.T) {
	t.Parallel()
	sched := &recordingScheduler{}
	tb := setup(t, func(o *Options) {
		o.Scheduler = sched
		o.ReminderLead = 10 * time.Minute
		o.DefaultGrace = 15 * time.Minute
	})
	ctx := context.Background()
	res := tb.resource(t, 3, 60, "08:00", "22:00")
	staff := booking.Actor{UserID: "desk", Role: booking.RoleStaff, VenueID: res.VenueID}
	kept := tb.book(t, alice, res, at("11:00"))
	checked := tb.book(t, booking.Actor{UserID: "bob", Role: booking.RoleUser}, res, at("11:00"))
	cancelled := tb.book(t, booking.Actor{UserID: "carol", Role: booking.RoleUser}, res, at("11:00"))

	tb.clock.Set(at("10:40"))
	_, err := tb.e.CheckIn(ctx, staff, checked.CheckinCode)
	require.NoError(t, err)
	_, err = tb.e.CancelBooking(ctx, booking.Actor{UserID: "carol", Role: booking.RoleUser}, cancelled.ID)
	require.NoError(t, err)
	sched.mu.Lock()
	cancels := map[uint64]bool{}
	for _, r := range sched.cancelled {
		cancels[r.BookingID] = true
	}
	sched.mu.Unlock()
	require.True(t, cancels[checked.ID], "a check-in drops the release task")
	require.True(t, cancels[cancelled.ID], "a cancel drops the release task")
	require.False(t, cancels[kept.ID])

	loops := tb.e.NewLoops(LoopsConfig{})
	tb.clock.Set(at("11:04"))
	require.NoError(t, loops.Run(ctx, "reminders"))
	require.Empty(t, tb.events(t, booking.EventReminder), "not yet: 11:15 − 10 min is 11:05")
	tb.clock.Set(at("11:05"))
	require.NoError(t, loops.Run(ctx, "reminders"))
	require.NoError(t, loops.Run(ctx, "reminders"))
	require.Equal(t, []string{sqlstore.BookingSubject(kept.ID)}, tb.events(t, booking.EventReminder),
		"one reminder, for the booking still CONFIRMED")
}

// events lists the subjects of the outbox events of one type, in order.
func (tb *testBundle) events(t testing.TB, typ string) []string {
	t.Helper()
	var rows []models.OutboxEvent
	require.NoError(t, tb.db.Gorm.Where("type = ?", typ).Order("id").Find(&rows).Error)
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.Subject)
	}
	return out
}

// A payment_id already used for another hold is a conflict, not the other hold's booking.
func TestPaymentIDReusedForAnotherHold(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 2, 60, "08:00", "22:00")
	h1, err := tb.e.Hold(ctx, HoldRequest{UserID: "alice", ResourceID: res.ID, Start: at("14:00"), End: at("15:00")})
	require.NoError(t, err)
	h2, err := tb.e.Hold(ctx, HoldRequest{UserID: "bob", ResourceID: res.ID, Start: at("14:00"), End: at("15:00")})
	require.NoError(t, err)
	first, err := tb.e.Pay(ctx, PaymentNotice{HoldID: h1.ID, PaymentID: "pay-1", AmountCents: h1.AmountCents, PaidAt: tb.clock.Now()})
	require.NoError(t, err)
	require.Equal(t, OutcomeBooked, first.Outcome)
	_, err = tb.e.Pay(ctx, PaymentNotice{HoldID: h2.ID, PaymentID: "pay-1", AmountCents: h2.AmountCents, PaidAt: tb.clock.Now()})
	require.ErrorIs(t, err, booking.ErrPaymentIDConflict)
	got, err := tb.e.GetHold(ctx, booking.Actor{UserID: "bob", Role: booking.RoleUser}, h2.ID)
	require.NoError(t, err)
	require.Equal(t, booking.HoldHeld, got.Status, "the other hold is untouched")
	again, err := tb.e.Pay(ctx, PaymentNotice{HoldID: h1.ID, PaymentID: "pay-1", AmountCents: h1.AmountCents, PaidAt: tb.clock.Now()})
	require.NoError(t, err)
	require.Equal(t, first.Booking.ID, again.Booking.ID, "the same notice is still answered as the first time")
}

// A user waits for a window once, however many requests race; the default page size is the
// engine's one.
func TestWaitlistOncePerUserAndWindow(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	_, err := tb.e.Hold(ctx, HoldRequest{UserID: "alice", ResourceID: res.ID, Start: at("14:00"), End: at("15:00")})
	require.NoError(t, err)
	var ok, dup atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := tb.e.JoinWaitlist(ctx, WaitlistRequest{UserID: "bob", ResourceID: res.ID, Start: at("14:00"), End: at("15:00")})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, booking.ErrAlreadyWaiting):
				dup.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 1, ok.Load())
	require.EqualValues(t, 19, dup.Load())
	// Another window, or another user, may still wait.
	_, err = tb.e.JoinWaitlist(ctx, WaitlistRequest{UserID: "bob", ResourceID: res.ID, Start: at("15:00"), End: at("16:00")})
	require.NoError(t, err)
	_, err = tb.e.JoinWaitlist(ctx, WaitlistRequest{UserID: "carol", ResourceID: res.ID, Start: at("14:00"), End: at("15:00")})
	require.NoError(t, err)
}

func TestDefaultPageSize(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	res := tb.resource(t, 30, 60, "08:00", "22:00")
	for i := range 25 {
		tb.book(t, booking.Actor{UserID: "u" + strconv.Itoa(i), Role: booking.RoleUser}, res, at("14:00"))
	}
	page, next, err := tb.e.ListBookings(ctx, booking.System, "", 0)
	require.NoError(t, err)
	require.Len(t, page, booking.DefaultPageSize)
	rest, last, err := tb.e.ListBookings(ctx, booking.System, next, 0)
	require.NoError(t, err)
	require.Len(t, rest, 5)
	require.Empty(t, last)
}

// A check-in received before release_at wins over the release even when both arrive within the same
// millisecond as a batch forms: the checked-in bookings end ARRIVED holding their units, counted
// once, the others RELEASED with their units back.
func TestCheckInBeatsABatchRelease(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	ctx := context.Background()
	const n = 200
	res := tb.resource(t, n, 60, "08:00", "22:00")
	var bs []booking.Booking
	for i := range n {
		bs = append(bs, tb.book(t, booking.Actor{UserID: "u" + strconv.Itoa(i), Role: booking.RoleUser}, res, at("11:00")))
	}
	releaseAt := bs[0].ReleaseAt.UTC()
	tb.clock.Set(releaseAt)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	var desk []booking.Booking
	for i := 0; i < n; i += 2 {
		desk = append(desk, bs[i])
	}
	tb.racingCheckIns(t, res.VenueID, releaseAt, desk, gate, &wg)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			_, err := tb.e.ReleaseDue(ctx, res.VenueID)
			require.NoError(t, err)
		}()
	}
	close(gate)
	wg.Wait()
	_, err := tb.e.ReleaseDue(ctx, res.VenueID)
	require.NoError(t, err)

	arrived := 0
	owners := map[string]bool{}
	for _, o := range tb.owners(t, res.VenueID) {
		owners[o] = true
	}
	for i, b := range bs {
		got, err := tb.e.GetBooking(ctx, booking.System, b.ID)
		require.NoError(t, err)
		owned := owners[string(redisstore.BookingOwner(b.ID))]
		if i%2 == 0 {
			require.Equal(t, booking.Arrived, got.Status, "booking %d was checked in before release_at", b.ID)
			require.True(t, owned, "booking %d keeps its unit", b.ID)
			arrived++
		} else {
			require.Equal(t, booking.Released, got.Status)
			require.False(t, owned, "booking %d gave its unit back", b.ID)
		}
	}
	require.Equal(t, arrived, tb.used(t, res.VenueID, res.ID, at("11:00")), "every unit counted once")
	require.Len(t, owners, arrived)
}
