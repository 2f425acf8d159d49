package engine_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/bench"
	"github.com/slotwheel/slotwheel/internal/testenv"
)

// BenchmarkHold compares the engine's hold path (validation, grid, script) against the bare hold
// script with precomputed arguments, on one hot slot and spread over 1,000 resources, on the same
// Redis in the same run: compare the holds/s of engine and bare_script within one case.
func BenchmarkHold(b *testing.B) {
	for _, c := range []struct {
		name      string
		resources int
	}{{"hot_slot", 1}, {"1000_resources", 1000}} {
		b.Run(c.name+"/bare_script", func(b *testing.B) {
			f := fixture(b, c.resources)
			run(b, f.BareHold)
		})
		b.Run(c.name+"/engine", func(b *testing.B) {
			f := fixture(b, c.resources)
			run(b, f.EngineHold)
		})
	}
}

func fixture(b *testing.B, resources int) *bench.Fixture {
	r := testenv.NewRedis(b)
	db := testenv.NewDB(b)
	e, err := engine.New(engine.Options{DB: db.Gorm, Redis: r.Client, Prefix: r.Prefix, HoldTTL: time.Hour})
	require.NoError(b, err)
	f, err := bench.NewFixture(context.Background(), e, r.Client, r.Prefix, resources)
	require.NoError(b, err)
	return f
}

func run(b *testing.B, op func(context.Context, uint64) error) {
	var n atomic.Uint64
	b.SetParallelism(16) // 32 goroutines on two cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(context.Background(), n.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "holds/s")
}

// BenchmarkRuleOps compares, on the same backends in the same run, the single-resource hold against
// a hold of a two-role service (a counsellor and a room, one script) and a reschedule (a Redis
// reservation, a MySQL commit and the move's end), with a hold and its confirm as the reference for
// an operation that must commit to MySQL: compare the ops/s.
func BenchmarkRuleOps(b *testing.B) {
	setupRules := func(b *testing.B) (*engine.Engine, engine.Resource, engine.Service) {
		r := testenv.NewRedis(b)
		db := testenv.NewDB(b)
		e, err := engine.New(engine.Options{DB: db.Gorm, Redis: r.Client, Prefix: r.Prefix, HoldTTL: time.Hour})
		require.NoError(b, err)
		ctx := context.Background()
		v, err := e.CreateVenue(ctx, booking.System, engine.VenueInput{Name: "bench", Timezone: "Asia/Shanghai"})
		require.NoError(b, err)
		mk := func() engine.Resource {
			res, err := e.CreateResource(ctx, booking.System, engine.ResourceInput{VenueID: v.ID, Name: "r", Kind: "room", Capacity: bench.Capacity})
			require.NoError(b, err)
			_, err = e.SetSchedule(ctx, booking.System, res.ID, booking.ScheduleInput{SlotMinutes: 60, HorizonDays: 3,
				Weekly: []booking.WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: "00:00", Close: "24:00"}}})
			require.NoError(b, err)
			_, err = e.SetResourcePolicy(ctx, booking.System, res.ID, booking.PolicyInput{MaxReschedules: ptr(100)})
			require.NoError(b, err)
			return res
		}
		single, counsellor, room := mk(), mk(), mk()
		svc, err := e.CreateService(ctx, booking.System, engine.ServiceInput{VenueID: v.ID, Name: "session", DurationMinutes: 60,
			Roles: []engine.ServiceRole{{Role: "counsellor", ResourceIDs: []uint64{counsellor.ID}}, {Role: "room", ResourceIDs: []uint64{room.ID}}}})
		require.NoError(b, err)
		return e, single, svc
	}
	tomorrow := func(e *engine.Engine, h int) time.Time {
		loc, _ := time.LoadLocation("Asia/Shanghai")
		d := e.Clock().Now().In(loc).AddDate(0, 0, 1)
		return time.Date(d.Year(), d.Month(), d.Day(), h, 0, 0, 0, loc)
	}
	b.Run("single_hold", func(b *testing.B) {
		e, res, _ := setupRules(b)
		start := tomorrow(e, 15)
		run(b, func(ctx context.Context, n uint64) error {
			_, err := e.Hold(ctx, engine.HoldRequest{UserID: "u" + strconv.FormatUint(n, 10), ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
			return err
		})
	})
	b.Run("two_role_hold", func(b *testing.B) {
		e, _, svc := setupRules(b)
		start := tomorrow(e, 15)
		run(b, func(ctx context.Context, n uint64) error {
			_, err := e.Hold(ctx, engine.HoldRequest{UserID: "u" + strconv.FormatUint(n, 10), ServiceID: svc.ID, Start: start})
			return err
		})
	})
	// The reference for a durable change: a hold and its confirm, one MySQL transaction like a move.
	b.Run("hold_and_confirm", func(b *testing.B) {
		e, res, _ := setupRules(b)
		start := tomorrow(e, 15)
		run(b, func(ctx context.Context, n uint64) error {
			user := "c" + strconv.FormatUint(n, 10)
			h, err := e.Hold(ctx, engine.HoldRequest{UserID: user, ResourceID: res.ID, Start: start, End: start.Add(time.Hour)})
			if err == nil {
				_, err = e.Confirm(ctx, booking.Actor{UserID: user, Role: booking.RoleUser}, h.ID)
			}
			return err
		})
	})
	b.Run("reschedule", func(b *testing.B) {
		e, res, _ := setupRules(b)
		ctx := context.Background()
		// One booking per goroutine slot, moved back and forth between two windows.
		const owners = 64
		ids := make([]uint64, owners)
		for i := range owners {
			user := "r" + strconv.Itoa(i)
			h, err := e.Hold(ctx, engine.HoldRequest{UserID: user, ResourceID: res.ID, Start: tomorrow(e, 10), End: tomorrow(e, 11)})
			require.NoError(b, err)
			bk, err := e.Confirm(ctx, booking.Actor{UserID: user, Role: booking.RoleUser}, h.ID)
			require.NoError(b, err)
			ids[i] = bk.ID
		}
		var turn [owners]atomic.Uint64
		run(b, func(ctx context.Context, n uint64) error {
			i := n % owners
			at := tomorrow(e, 12+int(turn[i].Add(1)%2))
			_, err := e.Reschedule(ctx, booking.Actor{UserID: "r" + strconv.FormatUint(i, 10), Role: booking.RoleUser},
				engine.RescheduleRequest{BookingID: ids[i], Start: at, End: at.Add(time.Hour)})
			if errors.Is(err, booking.ErrConfirmInProgress) || errors.Is(err, booking.ErrInvalidTransition) {
				return nil // two goroutines on one booking: one of them moves it
			}
			return err
		})
	})
}

func ptr[T any](v T) *T { return &v }
