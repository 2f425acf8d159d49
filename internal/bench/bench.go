// Package bench measures the hold path against the bare hold script on the same Redis in the
// same run, for `slotwheel bench` and the engine's Go benchmarks. It owns no rules; it drives
// engine's public API and must not be imported by production code paths other than the CLI.
package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/internal/redisstore"
)

// Fixture is a venue with resources whose one benchmark slot can take every hold of a run.
type Fixture struct {
	Engine    *engine.Engine
	Redis     redis.UniversalClient
	Resources []engine.Resource
	Start     time.Time // the benchmark slot: tomorrow 15:00 in the venue
	day       string
	bare      *Bare
}

// Capacity of every fixture resource: far more than a run can hold.
const Capacity = 1000000

// NewFixture creates a venue ("bench") with n resources open all day in hourly slots and loads the
// benchmark day into Redis, so both paths measure steady state. prefix is the engine's key prefix,
// which the bare path writes under too.
func NewFixture(ctx context.Context, e *engine.Engine, rdb redis.UniversalClient, prefix string, n int) (*Fixture, error) {
	v, err := e.CreateVenue(ctx, booking.System, engine.VenueInput{Name: "bench", Timezone: "Asia/Shanghai"})
	if err != nil {
		return nil, err
	}
	loc, _ := time.LoadLocation(v.Timezone)
	tomorrow := e.Clock().Now().In(loc).AddDate(0, 0, 1)
	f := &Fixture{Engine: e, Redis: rdb, bare: NewBare(rdb, prefix, e.Clock()), Start: time.Date(tomorrow.Year(), tomorrow.Month(), tomorrow.Day(), 15, 0, 0, 0, loc),
		day: tomorrow.Format("2006-01-02")}
	for i := 0; i < n; i++ {
		r, err := e.CreateResource(ctx, booking.System, engine.ResourceInput{VenueID: v.ID, Name: "desk " + strconv.Itoa(i),
			Kind: "desk", Capacity: Capacity})
		if err != nil {
			return nil, err
		}
		if _, err := e.SetSchedule(ctx, booking.System, r.ID, booking.ScheduleInput{SlotMinutes: 60, HorizonDays: 3,
			Weekly: []booking.WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: "00:00", Close: "24:00"}}}); err != nil {
			return nil, err
		}
		if _, err := e.Availability(ctx, engine.AvailabilityQuery{ResourceID: r.ID, Date: f.day}); err != nil {
			return nil, err
		}
		f.Resources = append(f.Resources, r)
	}
	return f, nil
}

// Cleanup deletes the fixture's keys from Redis.
func (f *Fixture) Cleanup(ctx context.Context) error {
	return f.bare.store.DeleteVenue(ctx, f.Resources[0].VenueID)
}

// EngineHold makes hold number i through the engine.
func (f *Fixture) EngineHold(ctx context.Context, i uint64) error {
	r := f.Resources[i%uint64(len(f.Resources))]
	_, err := f.Engine.Hold(ctx, engine.HoldRequest{UserID: "bench", ResourceID: r.ID, Start: f.Start, End: f.Start.Add(time.Hour)})
	return err
}

// BareHold makes hold number i with the bare hold script and precomputed arguments: what the
// engine's path sends, without anything the engine does around it.
func (f *Fixture) BareHold(ctx context.Context, i uint64) error {
	r := f.Resources[i%uint64(len(f.Resources))]
	return f.bare.Hold(ctx, r.VenueID, r.ID, f.Start, f.Start.Add(time.Hour), f.day, "bench", i)
}

// Bare runs the bare hold script of one keyspace, for benchmarks that compare a path against it.
type Bare struct {
	store *redisstore.Store
	clock clock.Clock
	// versions are the venues' catalog versions, read once: the engine's path sends its copy's
	// version with every hold too, and reads it only when its copy is loaded.
	versions sync.Map
}

// NewBare builds a Bare on rdb under the engine's key prefix.
func NewBare(rdb redis.UniversalClient, prefix string, clock clock.Clock) *Bare {
	return &Bare{store: redisstore.New(rdb, prefix), clock: clock}
}

// Hold takes one unit of the slot [start, end) (one grid slot of a loaded venue-local day) for
// user, as hold number i.
func (b *Bare) Hold(ctx context.Context, venueID, resourceID uint64, start, end time.Time, day, user string, i uint64) error {
	now := b.clock.Now()
	ver, ok := b.versions.Load(venueID)
	if !ok {
		v, err := b.store.CatalogVersion(ctx, venueID)
		if err != nil {
			return err
		}
		ver, _ = b.versions.LoadOrStore(venueID, v)
	}
	rec := &redisstore.HoldRecord{CatalogVersion: ver.(string), ID: "h" + strconv.FormatUint(venueID, 10) + "_bare" + strconv.FormatUint(1e15+i, 10),
		UserID: user, VenueID: venueID, ResourceID: resourceID, Quantity: 1, Start: start, End: end,
		OccupyStart: start, OccupyEnd: end, Deadline: now.Add(time.Hour), Created: now,
		Fields: []string{redisstore.SlotField(resourceID, start.Unix()/60)}, Days: []string{redisstore.DayField(resourceID, day)}}
	out, _, err := b.store.Hold(ctx, rec, now, 0)
	if err == nil && out != redisstore.HoldOK {
		err = fmt.Errorf("bare hold: %s", out)
	}
	return err
}

// Rate runs op from workers goroutines for d and returns operations per second.
func Rate(ctx context.Context, d time.Duration, workers int, op func(ctx context.Context, i uint64) error) (float64, error) {
	var n atomic.Uint64
	var firstErr error
	var once sync.Once
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := op(context.Background(), n.Add(1)); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, fmt.Errorf("benchmark: %w", firstErr)
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}
