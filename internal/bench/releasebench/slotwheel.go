package releasebench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/engine/loop"
	"github.com/slotwheel/slotwheel/models"
	"gorm.io/gorm"
)

const (
	// benchGrace is release_at − confirmed_at of a measured booking (see maker). It is short so that
	// confirmed_at is always ahead of the wall clock while bookings are made: a hold or a confirm
	// stamped in the past could look abandoned to the instance under test.
	benchGrace      = time.Second
	benchCategory   = "bench-release"
	scratchCategory = "bench-release-scratch"
	// scratchGrace keeps the bookings made to estimate the setup rate out of the measurement: they
	// fall due a day later.
	scratchGrace = 24 * time.Hour
	benchZone    = "Asia/Shanghai"
)

// maker makes bookings as another instance of the API would (hold, then a dev confirm), with a
// clock of its own that reads release_at − benchGrace while it books. confirmed_at is then exactly
// that, and release_at = confirmed_at + grace (a slot bought after it started keeps its grace:
// docs/DESIGN.md) exactly the instant the case needs — to the millisecond, which a slot grid and
// whole-second graces could not give. The instance under test never sees that clock: it runs on the
// wall clock, as Asynq and the backends do.
type maker struct {
	eng   *engine.Engine
	clock *clock.Simulated
}

// book holds and confirms one unit of the two hour slots around at, for user, confirming at at.
func (m *maker) book(ctx context.Context, res engine.Resource, loc *time.Location, user string, at time.Time) (booking.Booking, error) {
	m.clock.Set(at)
	start := hourStart(at, loc)
	h, err := m.eng.Hold(ctx, engine.HoldRequest{UserID: user, ResourceID: res.ID, Start: start, End: start.Add(2 * time.Hour), Quantity: 1})
	if err != nil {
		return booking.Booking{}, fmt.Errorf("hold for %s: %w", user, err)
	}
	b, err := m.eng.Confirm(ctx, booking.Actor{UserID: user, Role: booking.RoleUser}, h.ID)
	if err != nil {
		return booking.Booking{}, fmt.Errorf("confirm %s: %w", h.ID, err)
	}
	return b, nil
}

func hourStart(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), 0, 0, 0, loc)
}

// fixture is the catalog of a slotwheel measurement: venues with a hall each, whose bookings are
// measured (capacity: one unit per booking of the hall), and a scratch resource (in a venue of its
// own) for the rate estimate.
type fixture struct {
	loc     *time.Location
	halls   []engine.Resource
	scratch engine.Resource
}

func newFixture(ctx context.Context, eng *engine.Engine, n, venues, scratch int) (*fixture, error) {
	loc, err := time.LoadLocation(benchZone)
	if err != nil {
		return nil, err
	}
	for _, g := range []struct {
		category string
		grace    time.Duration
	}{{benchCategory, benchGrace}, {scratchCategory, scratchGrace}} {
		if _, err := eng.SetGracePolicy(ctx, booking.System, engine.GracePolicy{Category: g.category, GraceSeconds: int(g.grace / time.Second)}); err != nil {
			return nil, err
		}
	}
	f := &fixture{loc: loc}
	perHall := (n + venues - 1) / venues
	for i := range venues + 1 {
		name, capacity, category := fmt.Sprintf("hall %d", i), perHall, benchCategory
		if i == venues {
			name, capacity, category = "scratch", scratch, scratchCategory
		}
		v, err := eng.CreateVenue(ctx, booking.System, engine.VenueInput{Name: "bench release " + name, Timezone: benchZone})
		if err != nil {
			return nil, err
		}
		r, err := eng.CreateResource(ctx, booking.System, engine.ResourceInput{VenueID: v.ID, Name: name, Kind: "room",
			Capacity: capacity, Category: category})
		if err != nil {
			return nil, err
		}
		// Hour slots: a booking takes the two around its confirm, so that its slots are still
		// running (not past) when its units are looked at after its release.
		if _, err := eng.SetSchedule(ctx, booking.System, r.ID, booking.ScheduleInput{SlotMinutes: 60, HorizonDays: 2,
			Weekly: []booking.WeeklyRule{{Weekdays: []int{1, 2, 3, 4, 5, 6, 7}, Open: "00:00", Close: "24:00"}}}); err != nil {
			return nil, err
		}
		if i == venues {
			f.scratch = r
		} else {
			f.halls = append(f.halls, r)
		}
	}
	return f, nil
}

// hallOf is the hall booking i is made in.
func (f *fixture) hallOf(i int) engine.Resource { return f.halls[i%len(f.halls)] }

// unitsFree reports whether every slot that the bookings confirmed over [from, to] took in hall
// shows all its units free again in Redis, as a customer's availability query sees it.
func (f *fixture) unitsFree(ctx context.Context, eng *engine.Engine, hall engine.Resource, from, to time.Time) (bool, error) {
	hours := map[int64]bool{}
	days := []string{}
	for h := hourStart(from, f.loc); !h.After(hourStart(to, f.loc).Add(time.Hour)); h = h.Add(time.Hour) {
		hours[h.Unix()] = true
		if d := h.Format("2006-01-02"); len(days) == 0 || days[len(days)-1] != d {
			days = append(days, d)
		}
	}
	seen := 0
	for _, d := range days {
		slots, err := eng.Availability(ctx, engine.AvailabilityQuery{ResourceID: hall.ID, Date: d})
		if err != nil {
			return false, err
		}
		for _, s := range slots {
			if hours[s.Start.Unix()] {
				if s.Remaining != hall.Capacity {
					return false, nil
				}
				seen++
			}
		}
	}
	if seen != len(hours) {
		return false, fmt.Errorf("availability shows %d of the %d slots booked", seen, len(hours))
	}
	return true, nil
}

// measureSlotwheel measures slotwheel's own path: an engine with its loops and jobs' worker, as
// `slotwheel all` wires them (default settings but for reminders, which fire ReminderLead before
// release and not at it, and so are off), on its own database, key prefix and queues.
func measureSlotwheel(ctx context.Context, env *Env, cfg Config, s spec, p *Progress) (m *measurement, err error) {
	m = &measurement{design: DesignSlotwheel, label: cfg.label(DesignSlotwheel, s.c), c: s.c, n: s.n, observed: -1, unitsBack: -1, redisBytes: -1}
	if env.NewReleaseQueue == nil || env.LoaderInterval <= 0 {
		return nil, errors.New("releasebench: Env.NewReleaseQueue and Env.LoaderInterval are required to measure the slotwheel design")
	}
	p.Stage("creating a database", 0)
	cleanup := context.WithoutCancel(ctx)
	db, err := env.newDatabase(ctx, true)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, db.drop(cleanup)) }()
	log := env.logger()
	prefix := env.prefix() + ":" + randomName("bench-release-")
	// The instance under test is built as main builds it: on MySQL its release path has its own pool.
	var releaseDB *gorm.DB
	if db.mysql {
		if releaseDB, err = db.open(models.ReleaseConns); err != nil {
			return nil, err
		}
	}
	eng, err := engine.New(engine.Options{DB: db.gorm, ReleaseDB: releaseDB, Redis: env.Redis, Prefix: prefix, ReminderLead: -1, Logger: log})
	if err != nil {
		return nil, err
	}
	jb, err := env.NewReleaseQueue(eng, randomName("bench_release_"), cfg.Concurrency, log)
	if err != nil {
		return nil, err
	}
	eng.SetScheduler(jb)
	defer func() {
		jb.Stop()
		err = errors.Join(err, env.deleteKeys(cleanup, prefix+":*"), env.deleteQueues(cleanup, jb.Queues()...))
	}()
	scratch := min(max(s.n/50, 20), 300)
	f, err := newFixture(ctx, eng, s.n, min(cfg.Venues, s.n), scratch)
	if err != nil {
		return nil, err
	}
	// Bookings of other resources than the measured halls: the scratch one, and the busy case's
	// load's.
	others := []uint64{f.scratch.ID}
	var load *confirmLoad
	if s.c == CaseBusy {
		// Customers book through the instance under test, as `slotwheel all` serves its API: the
		// same engine, pool and loops as the releases.
		if load, err = newConfirmLoad(ctx, eng, "the instance under test's engine (its pool, loops, Redis)",
			cfg.BusyConfirmRate, cfg.loadDuration()); err != nil {
			return nil, err
		}
		others = append(others, load.resources()...)
	}
	notOthers, args := notIn("resource_id", others)
	// As an instance's start does: Redis is marked as holding what SQL says.
	if _, err := eng.Reconcile(ctx); err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if err := jb.Start(runCtx); err != nil {
		return nil, err
	}
	// Leased, as `slotwheel all` runs them: release tasks then leave bookings to the release loop.
	loops := eng.NewLoops(engine.LoopsConfig{Lease: eng.Lease})
	loops.Start(runCtx)
	defer loops.Stop()

	// The makers are another instance, with a pool of their own: the instance under test keeps its
	// connections, as it would in production. They queue no release task themselves: the instance
	// under test's loader does, as for every booking made more than the horizon ahead. (A confirm
	// queueing its own task marks it queued with a one-pair "(id, release_at) IN" UPDATE, which
	// MariaDB runs as a scan of the whole bookings table, locking every row; sixteen at once stall
	// each other into lock wait timeouts.)
	makerDB, err := db.open(cfg.SetupWorkers + 4)
	if err != nil {
		return nil, err
	}
	makers := make([]*maker, cfg.SetupWorkers)
	for i := range makers {
		c := clock.NewSimulated(time.Now())
		e, err := engine.New(engine.Options{DB: makerDB, Redis: env.Redis, Prefix: prefix, Clock: c, ReminderLead: -1, Logger: log})
		if err != nil {
			return nil, err
		}
		makers[i] = &maker{eng: e, clock: c}
	}

	// The rate includes the warm-up of caches and connections: an estimate on the slow side leaves
	// the run waiting a little, one on the fast side fails it, as the bookings would still be made
	// when the first is due (and the rate falls as the tables grow).
	p.Stage("estimating the setup rate", scratch)
	t0 := time.Now()
	if err := parallel(ctx, scratch, len(makers), p, func(ctx context.Context, w, i int) error {
		_, err := makers[w].book(ctx, f.scratch, f.loc, fmt.Sprintf("scratch-%d", i), time.Now())
		return err
	}); err != nil {
		return nil, err
	}
	rate := float64(scratch) / time.Since(t0).Seconds()
	// After the bookings are made, the loader has them queued within its interval.
	first := s.plan(time.Now(), rate, env.LoaderInterval)
	ats := s.releaseAts(first)
	last := ats[len(ats)-1]

	before := env.usedMemory(ctx)
	p.Stage("making bookings", s.n)
	t1 := time.Now()
	if err := parallel(ctx, s.n, len(makers), p, func(ctx context.Context, w, i int) error {
		b, err := makers[w].book(ctx, f.hallOf(i), f.loc, fmt.Sprintf("u%d", i), ats[i].Add(-benchGrace))
		if err == nil && !b.ReleaseAt.Equal(ats[i]) {
			err = fmt.Errorf("booking %d: release_at %s, want %s", b.ID, b.ReleaseAt, ats[i])
		}
		return err
	}); err != nil {
		return nil, err
	}
	obs, err := db.observer()
	if err != nil {
		return nil, err
	}
	p.Stage("waiting for the loader to queue the release tasks", 0)
	for {
		var left int
		if err := obs.QueryRowContext(ctx, "SELECT COUNT(*) FROM bookings WHERE queue_at IS NOT NULL AND "+notOthers, args...).Scan(&left); err != nil {
			return nil, err
		}
		if left == 0 {
			break
		}
		if err := checkOnTime(first); err != nil {
			return nil, err
		}
		if err := loop.Sleep(ctx, 50*time.Millisecond); err != nil {
			return nil, err
		}
	}
	m.setupPerSecond = float64(s.n) / time.Since(t1).Seconds()
	if after := env.usedMemory(ctx); before >= 0 && after >= 0 {
		m.redisBytes = float64(after-before) / float64(s.n)
	}
	if err := checkOnTime(first); err != nil {
		return nil, err
	}

	w := &sqlWatcher{db: obs, args: args,
		pendingQuery: "SELECT 1 FROM bookings WHERE status = 'CONFIRMED' AND " + notOthers + " LIMIT 1",
		countQuery:   "SELECT COUNT(*) FROM bookings WHERE status = 'RELEASED' AND " + notOthers}
	stopLoad := load.start(ctx, first, last)
	seen, contention, err := waitReleased(ctx, w, db.sql, s, first, last, cfg.Timeout, p)
	m.load, m.contention = stopLoad(), contention
	if err != nil {
		return nil, err
	}
	if !seen.IsZero() {
		m.observed = seen.Sub(last)
		m.perSecond = float64(s.n) / seen.Sub(first).Seconds()
		p.Stage("waiting for the units in Redis", len(f.halls))
		deadline := last.Add(cfg.Timeout)
		left := f.halls
		for len(left) > 0 && time.Now().Before(deadline) {
			var still []engine.Resource
			for _, h := range left {
				free, err := f.unitsFree(ctx, eng, h, ats[0].Add(-benchGrace), last.Add(-benchGrace))
				if err != nil {
					return nil, err
				}
				if !free {
					still = append(still, h)
				}
			}
			if left = still; len(left) == 0 {
				m.unitsBack = time.Since(last)
				break
			}
			p.Set(len(f.halls) - len(left))
			if err := loop.Sleep(ctx, tailPoll); err != nil {
				return nil, err
			}
		}
	}

	var rows []struct {
		ReleaseAt  time.Time
		ReleasedAt *time.Time
	}
	if err := db.gorm.WithContext(ctx).Model(&models.Booking{}).Select("release_at", "released_at").
		Where("resource_id NOT IN ?", others).Find(&rows).Error; err != nil {
		return nil, err
	}
	var latest time.Time
	for _, r := range rows {
		if r.ReleasedAt != nil {
			m.lags = append(m.lags, r.ReleasedAt.Sub(r.ReleaseAt))
			latest = later(latest, *r.ReleasedAt)
		}
	}
	if !latest.IsZero() {
		m.last = latest.Sub(last)
	}
	if len(m.lags) < s.n {
		m.note = fmt.Sprintf("%d bookings still CONFIRMED %s after the latest release_at", s.n-len(m.lags), cfg.Timeout)
	}
	m.finish()
	return m, nil
}

// notIn is a condition that column is none of ids, with its arguments.
func notIn(column string, ids []uint64) (string, []any) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return column + " NOT IN (?" + strings.Repeat(", ?", len(ids)-1) + ")", args
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
