package release

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/redisstore"
	"github.com/slotwheel/slotwheel/internal/sqlstore"
)

// The tests here drive the service alone, on fakes of its ports; the engine's tests drive it
// assembled, on real stores.

type fixedClock struct{ t time.Time }

func (c *fixedClock) Now() time.Time { return c.t }

// fakeSQL answers bookings from a map and counts its reads of them.
type fakeSQL struct {
	rows  map[uint64]sqlstore.Booking
	reads int
}

func (f *fakeSQL) ReleaseDue(context.Context, sqlstore.DueQuery, sqlstore.Decide) ([]sqlstore.Booking, []booking.Change, error) {
	return nil, nil, nil
}
func (f *fakeSQL) NextDue(context.Context) (time.Time, error) { return time.Time{}, nil }
func (f *fakeSQL) RecentlyReleased(context.Context, time.Time) ([]sqlstore.Booking, error) {
	return nil, nil
}
func (f *fakeSQL) Booking(_ context.Context, id uint64) (sqlstore.Booking, error) {
	f.reads++
	b, ok := f.rows[id]
	if !ok {
		return sqlstore.Booking{}, booking.ErrNotFound
	}
	return b, nil
}

// fakeRedis is the loop's mark and a record of give-backs.
type fakeRedis struct {
	held    bool
	settled time.Time
	err     error
	given   []redisstore.Freed
}

func (f *fakeRedis) GiveBack(_ context.Context, _ uint64, fs []redisstore.Freed, _ time.Time) (int, error) {
	f.given = append(f.given, fs...)
	return len(fs), nil
}
func (f *fakeRedis) Looper(context.Context, string) (bool, time.Time, error) {
	return f.held, f.settled, f.err
}
func (f *fakeRedis) SetSettled(_ context.Context, _ string, before time.Time, _ time.Duration) error {
	f.settled = before
	return nil
}

type noRules struct{}

func (noRules) CachedReleaseRules(time.Time, uint64) (map[uint64]booking.Policy, bool) {
	return nil, true
}
func (noRules) LoadReleaseRules(context.Context, uint64) error { return nil }

func newService(now time.Time) (*Service, *fakeSQL, *fakeRedis) {
	sql, rds := &fakeSQL{rows: map[uint64]sqlstore.Booking{}}, &fakeRedis{}
	s := New(Config{}, Ports{SQL: sql, Redis: rds, Rules: noRules{}, Clock: &fixedClock{now},
		Announce:        func(context.Context, []uint64, []string) {},
		SetTimers:       func(*sqlstore.Booking, time.Time) {},
		CountTransition: func(booking.Transition) {}})
	return s, sql, rds
}

// A zero Config takes the documented defaults.
func TestConfigDefaults(t *testing.T) {
	s, _, _ := newService(time.Now())
	c := s.Config()
	require.Equal(t, 1000, c.BatchSize)
	require.Equal(t, 3, c.Overlap)
	require.Equal(t, time.Minute, c.RunTimeout)
	require.Equal(t, time.Second, c.Refresh)
	require.Equal(t, time.Second, c.Slack)
	require.Equal(t, 10*time.Millisecond, c.Stall)
	require.Equal(t, time.Second, c.Takeover)
	require.Equal(t, 10*time.Second, c.SettledTTL)
	require.Equal(t, 5*time.Millisecond, c.Gap)
	require.Equal(t, 250*time.Millisecond, c.Interval)
	require.Equal(t, 5*time.Second, c.EarlyWait)
	require.Equal(t, booking.ReleaseOn, c.DefaultMode)
	require.NotNil(t, c.Hooks)
}

// A task whose release_at is before the loop's mark is settled without a read of SQL; one after it,
// or any task when Redis does not answer, reads its booking.
func TestReleaseTaskReadsTheLoopsMark(t *testing.T) {
	ctx := context.Background()
	now := time.UnixMilli(1_700_000_000_000).UTC()
	s, sql, rds := newService(now)
	ref := Ref{BookingID: 1, ReleaseAt: now.Add(-time.Minute)}
	rds.settled = now
	out, err := s.Release(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, Settled, out)
	require.Zero(t, sql.reads, "settled by the loop: nothing read")

	rds.err = errors.New("redis down")
	sql.rows[1] = sqlstore.Booking{Booking: booking.Booking{ID: 1, VenueID: 7, Status: booking.Released, ReleaseAt: ref.ReleaseAt, Version: 2}}
	out, err = s.Release(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, AlreadyReleased, out)
	require.Equal(t, []redisstore.Freed{{Booking: 1, Version: 2}}, rds.given,
		"a repeated delivery gives the units back again")

	out, err = s.Release(ctx, Ref{BookingID: 2, ReleaseAt: ref.ReleaseAt})
	require.NoError(t, err)
	require.Equal(t, NotApplicable, out, "a booking that is gone")
}

// A task before its booking's release_at is told how long to wait.
func TestReleaseTaskNeverActsEarly(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000).UTC()
	s, sql, _ := newService(now)
	sql.rows[1] = sqlstore.Booking{Booking: booking.Booking{ID: 1, Status: booking.Confirmed, ReleaseAt: now.Add(3 * time.Second)}}
	_, err := s.Release(context.Background(), Ref{BookingID: 1, ReleaseAt: now.Add(3 * time.Second), Retried: true})
	nd, ok := errors.AsType[*booking.NotDueError](err)
	require.True(t, ok, "%v", err)
	require.Equal(t, 3*time.Second, nd.Wait)
}

// The loop says nothing settled while a failure awaits its repair, and never past a booking an
// open run holds.
func TestSettledWaitsForRepairAndOpenRuns(t *testing.T) {
	r := newReleaser(Config{}.withDefaults())
	at := time.UnixMilli(1_700_000_000_000).UTC()
	r.running() // a start counts as a takeover
	_, ok := r.settledBefore(at)
	require.False(t, ok, "a takeover is repaired first")
	failed, ok := r.needsRepair()
	require.True(t, ok)
	r.repairedUpTo(failed)
	got, ok := r.settledBefore(at)
	require.True(t, ok)
	require.Equal(t, at, got)

	rd := r.begin()
	r.locked(rd, at.Add(-time.Second))
	got, ok = r.settledBefore(at)
	require.True(t, ok)
	require.Equal(t, at.Add(-time.Second), got, "not past the open run's bookings")
	r.end(rd, errors.New("commit failed"))
	_, ok = r.settledBefore(at)
	require.False(t, ok, "a failed run is repaired first")

	for range r.cfg.Overlap {
		require.NotNil(t, r.begin())
	}
	require.Nil(t, r.begin(), "at most Overlap runs are open")
}
