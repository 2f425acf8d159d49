// Package release releases no-shows at their release_at: the release loop that decides bookings as
// they fall due, in batches, and says up to when it has (its mark in Redis); the release task's entry
// point (Service.Release), which waits for the loop or releases its booking itself; and the types a
// release task queue speaks (Ref, Outcome, Scheduler). It reaches the stores, the catalog and the
// rest of the engine only through the ports of Ports; engine assembles it.
package release

import (
	"context"
	"log/slog"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
)

// Config tunes the release service and its loop. Zero values take the documented defaults; this is
// the one place they are set (withDefaults).
type Config struct {
	// BatchSize is how many bookings one transaction releases; default 1000. Slots start on the
	// hour, so no-shows fall due together, and one version-guarded UPDATE with bulk history and
	// outbox rows costs about what a single release does.
	BatchSize int
	// Overlap is how many batch transactions of one release run (or of the release loop's
	// overlapping runs together) may be open at once, and how many runs of the loop; default 3:
	// one batch's commit and units' return overlap the next one's reads and writes.
	Overlap int
	// RunTimeout bounds one release run; default 1m. A burst of tens of thousands of bookings takes
	// a few seconds; a run that takes longer is stuck on the database.
	RunTimeout time.Duration
	// Refresh bounds how long the release loop goes without looking at SQL; default 1s. A booking
	// another instance makes is seen within it (its release_at is at least its grace away; a
	// release task catches one due sooner, after Slack).
	Refresh time.Duration
	// Slack is how long past release_at a task leaves its booking to the release loop; default 1s:
	// the loop looks at each release_at it knows of and at least every Refresh, and a burst's
	// batches take a moment.
	Slack time.Duration
	// Stall is how long a run of the release loop that has locked its bookings may go on writing
	// them before the loop starts the next run beside it; default 10ms. A run usually takes a few
	// milliseconds.
	Stall time.Duration
	// Takeover is how long without the release loop running on this instance (holding its lease,
	// which lasts that long) means that it has just taken the loop over or starts; default 1s: the
	// instance that ran it before may have died between a batch's commit and its units' return.
	Takeover time.Duration
	// SettledTTL is how long the loop's word on what it has settled stands; default 10s: should
	// the loop stop, release tasks go back to reading their bookings.
	SettledTTL time.Duration
	// Gap is the least time between the end of a release run and the next one it asks for; default
	// 5ms: bookings falling due every millisecond are released in batches a few milliseconds apart
	// rather than one transaction each.
	Gap time.Duration
	// Interval is the tick of the release loop, which releases every CONFIRMED booking past its
	// release_at in batches, whatever happened to its task; default 250ms. A tick renews the loop's
	// lease and reads nothing unless a booking is known to be due by then, or the loop has not
	// looked at SQL for Refresh, or a booking of this process is due sooner than that: the loop
	// looks at SQL when releases fall due, not at every tick.
	Interval time.Duration
	// EarlyWait is the longest a release task that starts before its booking's release_at waits
	// for it (Task) before handing the task back to the queue; default 5s. A task is due at the
	// whole second after release_at, so only clock skew between instances starts one early.
	EarlyWait time.Duration
	// DefaultMode is the release mode of venues that set none; default booking.ReleaseOn.
	DefaultMode booking.ReleaseMode
	// Hooks, when set, lets tests inject failures into release batches; nil in production.
	Hooks *Hooks
}

// withDefaults is c with every zero value replaced by its default.
func (c Config) withDefaults() Config {
	setInt := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	setDuration := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	setInt(&c.BatchSize, 1000)
	setInt(&c.Overlap, 3)
	setDuration(&c.RunTimeout, time.Minute)
	setDuration(&c.Refresh, time.Second)
	setDuration(&c.Slack, time.Second)
	setDuration(&c.Stall, 10*time.Millisecond)
	setDuration(&c.Takeover, time.Second)
	setDuration(&c.SettledTTL, 10*time.Second)
	setDuration(&c.Gap, 5*time.Millisecond)
	setDuration(&c.Interval, 250*time.Millisecond)
	setDuration(&c.EarlyWait, 5*time.Second)
	if c.DefaultMode == "" {
		c.DefaultMode = booking.ReleaseOn
	}
	if c.Hooks == nil {
		c.Hooks = &Hooks{}
	}
	return c
}

// Hooks let tests inject failures at the steps of a release batch; zero in production. They are
// read as batches run, so a test may set them on the Hooks it passed in Config after New.
type Hooks struct {
	// BatchSize, when set, is a release batch's size in place of Config.BatchSize, so that a burst
	// of a few hundred bookings spans many overlapping batches.
	BatchSize int
	// EarlyGiveBackFails makes a release batch's give-back before its commit fail, as when Redis
	// does not answer then: its units go back after the commit instead (afterRelease).
	EarlyGiveBackFails bool
	// AfterBatchCommit runs after a release batch that decided bookings committed and before their
	// units go back (a batch that found nothing due, such as a run's beside one that holds the rows,
	// does not run it); an error makes the run stop there as a killed process would.
	AfterBatchCommit func() error
	// BatchLocked runs when a release batch has locked its rows, with how many batch transactions
	// of its run are open then (itself included).
	BatchLocked func(open int)
}

// SQL is what the service reads and writes in SQL: the due index and release batches, and a
// booking. *sqlstore.Store has them.
type SQL interface {
	ReleaseDue(ctx context.Context, q sqlstore.DueQuery, decide sqlstore.Decide) ([]sqlstore.Booking, []booking.Change, error)
	NextDue(ctx context.Context) (time.Time, error)
	RecentlyReleased(ctx context.Context, since time.Time) ([]sqlstore.Booking, error)
	Booking(ctx context.Context, id uint64) (sqlstore.Booking, error)
}

// Redis is what the service does in Redis: give released units back, and read and write the loop's
// mark (its lease and up to when it has settled releases). *redisstore.Store has them.
type Redis interface {
	GiveBack(ctx context.Context, venueID uint64, freed []redisstore.Freed, now time.Time) (int, error)
	Looper(ctx context.Context, name string) (held bool, settled time.Time, err error)
	SetSettled(ctx context.Context, name string, before time.Time, ttl time.Duration) error
}

// Rules is what a release batch needs of the catalog: a venue's zone (events are rendered in it) and
// its resources' booking rules.
type Rules interface {
	// CachedReleaseRules answers, from the catalog's cache alone, the booking rules of venue v's
	// resources that have some, when they and the venue's zone are fresh.
	CachedReleaseRules(now time.Time, v uint64) (map[uint64]booking.Policy, bool)
	// LoadReleaseRules loads into the cache what CachedReleaseRules answers for venue v.
	LoadReleaseRules(ctx context.Context, v uint64) error
}

// Announcer tells whoever reacts to freed units (the waitlist, the no-show freezes) of the
// resources a release freed and of the owners it released as no-shows.
type Announcer func(ctx context.Context, resources []uint64, noShows []string)

// Clock tells the time; the engine's reads milliseconds, the precision of both stores.
type Clock interface{ Now() time.Time }

// Ports are what the service reaches outside itself. Every one is required but Logger.
type Ports struct {
	SQL      SQL
	Redis    Redis
	Rules    Rules
	Announce Announcer
	// SetTimers clears or sets what a booking still needs to be timed after its release was decided
	// at now (its release task, reminder and due_at), before the batch writes it.
	SetTimers func(b *sqlstore.Booking, now time.Time)
	// CountTransition counts a booking's status change in the engine's metrics.
	CountTransition func(booking.Transition)
	Clock           Clock
	Logger          *slog.Logger // default slog.Default()
}
