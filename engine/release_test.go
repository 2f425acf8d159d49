package engine

import (
	"context"
	"database/sql"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/release"
	"github.com/slotwheel/slotwheel/internal/backend"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/models"
)

// A burst released by overlapping batches, by several runs at once and with check-ins racing them:
// every due booking ends either checked in (a check-in that came after its batch restores it) or
// released exactly once (one version step, one history row, one event, its unit back), and a
// booking due a millisecond later is left alone.
func TestOverlappingBatchesReleaseABurstOnce(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	ctx := context.Background()
	const n, later = 300, 20
	tb.e.hooks.release.BatchSize = 25
	var mostOpen atomic.Int64
	tb.e.hooks.release.BatchLocked = func(open int) {
		for {
			m := mostOpen.Load()
			if int64(open) <= m || mostOpen.CompareAndSwap(m, int64(open)) {
				return
			}
		}
	}
	res := tb.resource(t, n, 60, "08:00", "22:00")
	var due, notYet []booking.Booking
	for i := range n {
		due = append(due, tb.book(t, booking.Actor{UserID: "u" + strconv.Itoa(i), Role: booking.RoleUser}, res, at("11:00")))
	}
	for i := range later {
		notYet = append(notYet, tb.book(t, booking.Actor{UserID: "w" + strconv.Itoa(i), Role: booking.RoleUser}, res, at("12:00")))
	}
	releaseAt := due[0].ReleaseAt.UTC()
	// The later bookings fall due a millisecond after the burst: still CONFIRMED once it is released.
	require.NoError(t, tb.db.Gorm.Model(&models.Booking{}).Where("id IN ?", ids(notYet)).
		Updates(map[string]any{"release_at": releaseAt.Add(time.Millisecond), "due_at": releaseAt.Add(time.Millisecond)}).Error)
	tb.clock.Set(releaseAt)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	var desk []booking.Booking
	for i := 0; i < n; i += 10 {
		desk = append(desk, due[i])
	}
	tb.racingCheckIns(t, res.VenueID, releaseAt, desk, gate, &wg)
	// Runs over every venue and over this one are separate flights: they share the burst.
	for _, venue := range []uint64{0, res.VenueID, 0, res.VenueID} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			_, err := tb.e.ReleaseDue(ctx, venue)
			require.NoError(t, err)
		}()
	}
	close(gate)
	wg.Wait()
	_, err := tb.e.ReleaseDue(ctx, 0)
	require.NoError(t, err)
	if tb.db.MySQL {
		require.Greater(t, mostOpen.Load(), int64(1), "a burst's batches overlap")
	}

	owners := map[string]bool{}
	for _, o := range tb.owners(t, res.VenueID) {
		owners[o] = true
	}
	var history []models.BookingHistory
	require.NoError(t, tb.db.Gorm.Where("to_status = ?", string(booking.Released)).Find(&history).Error)
	releases := map[uint64]int{}
	for _, h := range history {
		releases[h.BookingID]++
	}
	var events []models.OutboxEvent
	require.NoError(t, tb.db.Gorm.Where("type = ?", "booking.released").Find(&events).Error)
	announced := map[string]int{}
	for _, ev := range events {
		announced[ev.Subject]++
	}
	arrived := 0
	for i, b := range due {
		got, err := tb.e.GetBooking(ctx, booking.System, b.ID)
		require.NoError(t, err)
		owned := owners[string(redisstore.BookingOwner(b.ID))]
		if i%10 == 0 {
			require.Equal(t, booking.Arrived, got.Status, "booking %d was checked in before release_at", b.ID)
			require.True(t, owned, "booking %d keeps its unit", b.ID)
			arrived++
			continue
		}
		require.Equal(t, booking.Released, got.Status, "booking %d", b.ID)
		require.Equal(t, 2, got.Version, "booking %d released in one step", b.ID)
		require.Equal(t, 1, releases[b.ID], "booking %d has one release in its history", b.ID)
		require.Equal(t, 1, announced[sqlstore.BookingSubject(b.ID)], "booking %d announced once", b.ID)
		require.False(t, owned, "booking %d gave its unit back", b.ID)
	}
	for _, b := range notYet {
		got, err := tb.e.GetBooking(ctx, booking.System, b.ID)
		require.NoError(t, err)
		require.Equal(t, booking.Confirmed, got.Status, "booking %d is due a millisecond later", b.ID)
		require.Zero(t, releases[b.ID])
	}
	require.Equal(t, arrived, tb.used(t, res.VenueID, res.ID, at("11:00")), "every unit counted once")
}

// releaseOnly configures loops in which only the release loop runs, every every; the others wait an
// hour.
func releaseOnly(every time.Duration) LoopsConfig {
	return LoopsConfig{ReleaseInterval: every, SweepInterval: time.Hour, ExpiryInterval: time.Hour,
		WheelSweepInterval: time.Hour, RelayInterval: time.Hour}
}

func ids(bs []booking.Booking) []uint64 {
	out := make([]uint64, len(bs))
	for i, b := range bs {
		out[i] = b.ID
	}
	return out
}

// The release loop looks again when the next booking falls due, not only at its interval: with an
// hourly interval, a booking due 10 ms after a run is released once its release_at has come.
func TestReleaseLoopWakesAtTheNextReleaseAt(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	b := tb.book(t, alice, res, at("11:00"))
	tb.clock.Set(b.ReleaseAt.Add(-10 * time.Millisecond))
	loops := tb.e.NewLoops(releaseOnly(time.Hour))
	loops.Start(ctx)
	defer loops.Stop()
	require.NoError(t, loops.Run(ctx, release.LoopName))
	got, err := tb.e.GetBooking(ctx, alice, b.ID)
	require.NoError(t, err)
	require.Equal(t, booking.Confirmed, got.Status, "not due yet")
	tb.clock.Set(b.ReleaseAt)
	require.Eventually(t, func() bool {
		got, err := tb.e.GetBooking(ctx, alice, b.ID)
		return err == nil && got.Status == booking.Released
	}, 10*time.Second, 5*time.Millisecond, "released by the run the loop asked for at release_at")
}

// Once the release loop has decided the bookings due before a moment, their release tasks finish
// without reading SQL; a task of a booking the loop has not decided yet still releases it itself.
func TestReleaseTasksSettledByTheLoop(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 2, 60, "08:00", "22:00")
	early := tb.book(t, alice, res, at("11:00"))
	late := tb.book(t, alice, res, at("12:00"))
	loops := tb.e.NewLoops(LoopsConfig{ReleaseInterval: time.Hour})
	tb.clock.Set(early.ReleaseAt)
	require.NoError(t, loops.Run(ctx, release.LoopName))

	require.Equal(t, release.Settled, tb.releaseTask(t, early), "the loop released it")
	got, err := tb.e.GetBooking(ctx, alice, early.ID)
	require.NoError(t, err)
	require.Equal(t, booking.Released, got.Status)

	// The loop said "settled before 12:15" (the next release_at); nobody runs it any more, and the
	// later booking's task does the work.
	tb.clock.Set(late.ReleaseAt)
	require.Equal(t, release.Released, tb.releaseTask(t, late))
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, at("11:00")))
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, at("12:00")))
}

// A release loop that died between a batch's commit and its units' return says nothing settled, so
// the tasks still look; and the instance that takes the loop over gives the units back at once.
func TestReleaseLoopTakeoverGivesBackLostUnits(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 3, 60, "08:00", "22:00")
	var bs []booking.Booking
	for i := range 3 {
		bs = append(bs, tb.book(t, booking.Actor{UserID: "u" + strconv.Itoa(i), Role: booking.RoleUser}, res, at("11:00")))
	}
	tb.clock.Set(bs[0].ReleaseAt)
	tb.e.hooks.release.EarlyGiveBackFails = true // Redis did not answer before the commit
	tb.e.hooks.release.AfterBatchCommit = func() error { return errSimulatedCrash }
	require.ErrorIs(t, tb.e.NewLoops(LoopsConfig{}).Run(ctx, release.LoopName), errSimulatedCrash)
	require.Equal(t, 3, tb.used(t, res.VenueID, res.ID, at("11:00")), "committed, units not back yet")
	_, settled, err := tb.e.rs.Looper(ctx, release.LoopName)
	require.NoError(t, err)
	require.False(t, bs[0].ReleaseAt.Before(settled), "a run that died says nothing settled")

	// A task that fires now finds its booking RELEASED and gives its units back.
	require.Equal(t, release.AlreadyReleased, tb.releaseTask(t, bs[0]))
	require.Equal(t, 2, tb.used(t, res.VenueID, res.ID, at("11:00")))

	// Another instance takes the loop over: the other two come back before it says they are settled.
	tb.restart(t)
	tb.clock.Advance(time.Second) // the lease of the dead holder runs out
	require.NoError(t, tb.e.NewLoops(LoopsConfig{}).Run(ctx, release.LoopName))
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, at("11:00")))
	for _, b := range bs[1:] {
		require.Equal(t, release.Settled, tb.releaseTask(t, b))
	}
}

// A run whose batch committed without word (the acknowledgement lost) fails; the same instance's
// next run gives the units back before it says the bookings settled.
func TestReleaseLoopRepairsAfterAFailedRun(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 2, 60, "08:00", "22:00")
	b := tb.book(t, alice, res, at("11:00"))
	loops := tb.e.NewLoops(LoopsConfig{})
	require.NoError(t, loops.Run(ctx, release.LoopName), "a run before, so that the next is no takeover")
	tb.clock.Set(b.ReleaseAt)
	tb.e.hooks.release.EarlyGiveBackFails = true // Redis did not answer before the commit
	tb.e.hooks.release.AfterBatchCommit = func() error { return sqlstore.ErrCommitUnknown }
	require.ErrorIs(t, loops.Run(ctx, release.LoopName), sqlstore.ErrCommitUnknown)
	tb.e.hooks.release.AfterBatchCommit = nil
	require.Equal(t, 1, tb.used(t, res.VenueID, res.ID, at("11:00")), "committed, units not back yet")

	require.NoError(t, loops.Run(ctx, release.LoopName))
	require.Equal(t, 0, tb.used(t, res.VenueID, res.ID, at("11:00")), "the next run gave them back")
	tb.clock.Advance(tb.e.releases.Config().Refresh) // the loop's next look at SQL
	require.NoError(t, loops.Run(ctx, release.LoopName))
	require.Equal(t, release.Settled, tb.releaseTask(t, b))
}

// A release run stuck after its commit (a slow disk, a lost acknowledgement being waited for) does
// not hold back the bookings falling due behind it: the loop runs on beside it. It says nothing
// settled past the stuck run's booking until that booking's unit is back.
func TestReleaseLoopRunsPastAStalledRun(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	if !tb.db.MySQL {
		t.Skip("runs overlap where rows are locked per transaction (MySQL); SQLite serialises writers")
	}
	ctx := context.Background()
	res := tb.resource(t, 2, 60, "08:00", "22:00")
	bob := booking.Actor{UserID: "bob", Role: booking.RoleUser}
	stuck := tb.book(t, alice, res, at("11:00"))
	behind := tb.book(t, bob, res, at("11:00"))
	// behind falls due a millisecond after stuck.
	behind.ReleaseAt = stuck.ReleaseAt.Add(time.Millisecond)
	require.NoError(t, tb.db.Gorm.Model(&models.Booking{}).Where("id = ?", behind.ID).
		Updates(map[string]any{"release_at": behind.ReleaseAt, "due_at": behind.ReleaseAt}).Error)

	stalled, resume := make(chan struct{}), make(chan struct{})
	tb.e.hooks.release.EarlyGiveBackFails = true // Redis did not answer before the commit
	var later atomic.Bool
	tb.e.hooks.release.AfterBatchCommit = func() error {
		if !later.Swap(true) {
			close(stalled)
			<-resume
		}
		return nil
	}
	loops := tb.e.NewLoops(releaseOnly(10 * time.Millisecond))
	tb.clock.Set(stuck.ReleaseAt)
	loops.Start(ctx)
	defer loops.Stop()
	var resumed sync.Once
	defer resumed.Do(func() { close(resume) }) // before Stop, which waits for the stuck run
	select {
	case <-stalled:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop never released the first booking")
	}

	// state reads what a user and a release task would see: the units taken of the slot, whether
	// behind is RELEASED, and up to when the loop says bookings settled.
	state := func() (used int, released bool, settled time.Time, err error) {
		used, err = tb.usedErr(res.VenueID, res.ID, at("11:00"))
		if err != nil {
			return 0, false, time.Time{}, err
		}
		got, err := tb.e.GetBooking(ctx, bob, behind.ID)
		if err != nil {
			return 0, false, time.Time{}, err
		}
		_, settled, err = tb.e.rs.Looper(ctx, release.LoopName)
		return used, got.Status == booking.Released, settled, err
	}
	tb.clock.Set(behind.ReleaseAt)
	// A run beside the stuck one says bookings settled up to the stuck one's release_at, not past
	// it: SQL no longer shows that booking due, but its unit is not back.
	require.Eventually(t, func() bool {
		used, released, settled, err := state()
		return err == nil && released && used == 1 && settled.Equal(stuck.ReleaseAt)
	}, 10*time.Second, 5*time.Millisecond, "behind released, its unit back, while the run before it is stuck")
	require.Equal(t, release.AlreadyReleased, tb.releaseTask(t, behind), "its task reads the booking")

	resumed.Do(func() { close(resume) })
	// By the loop's next look at SQL at the latest: a tick that the load held past the lease's TTL
	// counts as a takeover (in real time), and then only a run after it may say anything settled.
	tb.clock.Advance(tb.e.releases.Config().Refresh)
	require.Eventually(t, func() bool {
		used, _, settled, err := state()
		return err == nil && used == 0 && behind.ReleaseAt.Before(settled)
	}, 10*time.Second, 5*time.Millisecond, "the stuck run ends: its unit back, both said settled")
}

// A booking load that holds every connection of the main pool does not hold releases back: the
// release path has connections of its own (backend.ReleasePool), so a no-show is released and its
// unit is free again while no hold or confirm could get a connection.
func TestReleasesDoNotWaitForTheMainPool(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	if !db.MySQL {
		t.Skip("SQLite serialises every writer: the release path has no pool of its own there")
	}
	const mainConns = 4
	main, err := models.OpenMySQL(db.DSN, models.Pool{MaxOpen: mainConns, MaxIdle: mainConns})
	require.NoError(t, err)
	release, err := backend.ReleasePool(backend.SQL{DSN: db.DSN})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, g := range []*gorm.DB{main, release} {
			if s, err := g.DB(); err == nil {
				_ = s.Close()
			}
		}
	})
	tb := setup(t, func(o *Options) { o.DB, o.ReleaseDB = main, release })
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	b := tb.book(t, booking.Actor{UserID: "guest", Role: booking.RoleUser}, res, at("11:00"))
	_, err = tb.e.GetBooking(ctx, booking.System, b.ID) // the catalog's cache warm, as on a serving instance
	require.NoError(t, err)

	// The booking load: every connection of the main pool in an open transaction.
	sqlMain, err := main.DB()
	require.NoError(t, err)
	var busy []*sql.Tx
	for range mainConns {
		tx, err := sqlMain.BeginTx(ctx, nil)
		require.NoError(t, err)
		busy = append(busy, tx)
	}
	freeMain := func() {
		for _, tx := range busy {
			_ = tx.Rollback()
		}
		busy = nil
	}
	t.Cleanup(freeMain)

	tb.clock.Set(b.ReleaseAt)
	done := make(chan error, 1)
	go func() {
		_, err := tb.e.ReleaseDue(ctx, 0)
		done <- err
	}()
	obs, err := models.OpenMySQL(db.DSN, models.Pool{MaxOpen: 1, MaxIdle: 1})
	require.NoError(t, err)
	t.Cleanup(func() {
		if s, err := obs.DB(); err == nil {
			_ = s.Close()
		}
	})
	require.Eventually(t, func() bool {
		var row models.Booking
		require.NoError(t, obs.Select("status").First(&row, b.ID).Error)
		return row.Status == string(booking.Released) && len(tb.owners(t, res.VenueID)) == 0
	}, 10*time.Second, 5*time.Millisecond, "the release waited for the main pool")
	freeMain()
	require.NoError(t, <-done)
}

// A client that reads RELEASED finds the slot bookable: a batch's units are back before its commit
// makes the release visible, not after.
func TestReleasedIsBookableOnceVisible(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(o *Options) { o.DefaultGrace = 15 * time.Minute })
	ctx := context.Background()
	res := tb.resource(t, 1, 60, "08:00", "22:00")
	b := tb.book(t, alice, res, at("11:00"))
	var ownersAtCommit []string
	tb.e.hooks.release.AfterBatchCommit = func() error {
		ownersAtCommit = tb.owners(t, res.VenueID)
		return nil
	}
	tb.clock.Set(b.ReleaseAt)
	n, err := tb.e.ReleaseDue(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NotNil(t, ownersAtCommit, "the batch committed")
	require.Empty(t, ownersAtCommit, "the unit was back when the release committed")
	_, err = tb.e.Hold(ctx, HoldRequest{UserID: "bob", ResourceID: res.ID, Start: at("11:00"), End: at("12:00")})
	require.NoError(t, err)
}
