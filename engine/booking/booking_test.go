package booking

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var shanghai = func() *time.Location {
	loc, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		panic(err)
	}
	return loc
}()

// t0 is a Monday 10:00 in Shanghai.
var t0 = time.Date(2026, 12, 7, 10, 0, 0, 0, shanghai)

var rules = Rules{RestoreWindow: 30 * time.Minute, CheckinOpens: 30 * time.Minute}

const ms = time.Millisecond

// confirmed is a 10:00–11:30 booking released at 10:15.
func confirmed() Booking {
	return Booking{ID: 1, UserID: "alice", VenueID: 7, Status: Confirmed, Version: 1,
		Start: t0, End: t0.Add(90 * time.Minute), OccupyStart: t0, OccupyEnd: t0.Add(90 * time.Minute),
		ReleaseAt: t0.Add(15 * time.Minute), ConfirmedAt: t0.Add(-time.Hour)}
}

func released(at time.Time) Booking {
	b := confirmed()
	if _, err := b.Release(at, DefaultPolicy()); err != nil {
		panic(err)
	}
	return b
}

func TestTransitionTableIsClosed(t *testing.T) {
	t.Parallel()
	allowed := map[[2]Status]bool{
		{Confirmed, Arrived}: true, {Confirmed, Released}: true, {Confirmed, CancelledByUser}: true,
		{Confirmed, CancelledByAdmin}: true, {Arrived, InProgress}: true, {Arrived, Completed}: true,
		{Arrived, CancelledByAdmin}: true, {InProgress, Completed}: true, {Released, Confirmed}: true,
		{Released, Arrived}:          true,
		{PendingApproval, Confirmed}: true, {PendingApproval, Declined}: true,
		{PendingApproval, CancelledByUser}: true, {PendingApproval, CancelledByAdmin}: true,
	}
	for _, from := range Statuses() {
		for _, to := range Statuses() {
			require.Equal(t, allowed[[2]Status{from, to}], CanMove(from, to), "%s → %s", from, to)
		}
	}
	listed := map[[2]Status]bool{}
	for _, tr := range Transitions() {
		listed[[2]Status{tr.From, tr.To}] = true
	}
	require.Equal(t, allowed, listed, "Transitions lists the table, each change once")
	for _, s := range Statuses() {
		got, ok := ParseStatus(string(s))
		require.True(t, ok)
		require.Equal(t, s, got)
		require.Equal(t, s == PendingApproval || s == Confirmed || s == Arrived || s == InProgress, s.Occupies(), s)
	}
	_, ok := ParseStatus("HELD")
	require.False(t, ok, "holds are not bookings")
}

func TestCheckInWindow(t *testing.T) {
	t.Parallel()
	opens := t0.Add(-30 * time.Minute)
	closes := t0.Add(45 * time.Minute) // release_at 10:15 + 30 min restore window
	cases := []struct {
		name     string
		b        Booking
		received time.Time
		err      error
		take     bool
	}{
		{"a millisecond before it opens", confirmed(), opens.Add(-ms), ErrTooEarly, false},
		{"the moment it opens", confirmed(), opens, nil, false},
		{"a millisecond before release_at", confirmed(), t0.Add(15*time.Minute - ms), nil, false},
		{"not yet released at release_at: the restore window applies", confirmed(), t0.Add(15 * time.Minute), nil, false},
		{"last millisecond of the window", confirmed(), closes.Add(-ms), nil, false},
		{"when the window closes", confirmed(), closes, ErrTooLate, false},
		{"released, received before release_at", released(t0.Add(15 * time.Minute)), t0.Add(15*time.Minute - ms), nil, true},
		{"released, within the restore window", released(t0.Add(16 * time.Minute)), t0.Add(46*time.Minute - ms), nil, true},
		{"released, the window has closed", released(t0.Add(16 * time.Minute)), t0.Add(46 * time.Minute), ErrTooLate, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			before := b
			c, err := b.CheckIn(tc.received, "staff:desk", rules)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				require.Equal(t, before, b, "a refused check-in changes nothing")
				return
			}
			require.NoError(t, err)
			require.Equal(t, Arrived, b.Status)
			require.Equal(t, tc.received, *b.CheckedInAt)
			require.Equal(t, tc.take, c.TakesUnits())
			require.True(t, c.DropTimers, "the release task is no longer needed")
			require.Equal(t, EventCheckedIn, c.Event())
		})
	}
	b := confirmed()
	_, err := b.CheckIn(opens.Add(-time.Minute), "staff:desk", rules)
	e, ok := AsError(err)
	require.True(t, ok)
	require.Equal(t, opens, e.Details["opens_at"], "too_early says when check-in opens")

	arrived := confirmed()
	_, err = arrived.CheckIn(t0, "staff:desk", rules)
	require.NoError(t, err)
	c, err := arrived.CheckIn(t0.Add(time.Minute), "staff:desk", rules)
	require.NoError(t, err)
	require.True(t, c.None(), "scanning twice changes nothing")

	cancelled := confirmed()
	_, err = cancelled.Cancel(Actor{UserID: "alice", Role: RoleUser}, t0.Add(-time.Hour), DefaultPolicy())
	require.NoError(t, err)
	_, err = cancelled.CheckIn(t0, "staff:desk", rules)
	require.ErrorIs(t, err, ErrInvalidTransition)
}

func TestReleaseIsNeverEarlyAndOnce(t *testing.T) {
	t.Parallel()
	b := confirmed()
	_, err := b.Release(b.ReleaseAt.Add(-ms), DefaultPolicy())
	var nd *NotDueError
	require.ErrorAs(t, err, &nd)
	require.Equal(t, ms, nd.Wait)
	require.Equal(t, Confirmed, b.Status)

	c, err := b.Release(b.ReleaseAt, DefaultPolicy())
	require.NoError(t, err)
	require.Equal(t, Released, b.Status)
	require.Equal(t, b.ReleaseAt, *b.ReleasedAt)
	require.True(t, c.FreesUnits())
	require.Equal(t, ActorSystem, c.Actor)
	require.Equal(t, EventReleased, c.Event())

	again, err := b.Release(b.ReleaseAt.Add(time.Second), DefaultPolicy())
	require.NoError(t, err)
	require.True(t, again.None(), "a second release does nothing")

	in := confirmed()
	_, err = in.CheckIn(t0, "staff:desk", rules)
	require.NoError(t, err)
	c, err = in.Release(in.ReleaseAt.Add(time.Hour), DefaultPolicy())
	require.NoError(t, err)
	require.True(t, c.None(), "a checked-in booking is not released")
}

func TestRestoreWindow(t *testing.T) {
	t.Parallel()
	rel := t0.Add(20 * time.Minute)
	cases := []struct {
		name string
		b    Booking
		now  time.Time
		err  error
	}{
		{"at the release", released(rel), rel, nil},
		{"last millisecond of the window", released(rel), rel.Add(30*time.Minute - ms), nil},
		{"when the window closes", released(rel), rel.Add(30 * time.Minute), ErrRestoreWindowClosed},
		{"before the release", released(rel), rel.Add(-ms), ErrRestoreWindowClosed},
		{"not released", confirmed(), rel, ErrInvalidTransition},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			c, err := b.Restore(tc.now, 15*time.Minute, "user:alice", rules)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, Confirmed, b.Status)
			require.Equal(t, tc.now.Add(15*time.Minute), b.ReleaseAt)
			require.Nil(t, b.ReleasedAt)
			require.True(t, c.TakesUnits() && c.NewReleaseAt)
			require.Equal(t, EventRestored, c.Event())
		})
	}

	// The window never reaches past the end of the slot: a booking released 10 minutes before its
	// end can be restored for those 10 minutes only, so that no restore produces a second release
	// after the slot is over.
	late := confirmed()
	late.ReleaseAt = late.End.Add(-10 * time.Minute)
	_, err := late.Release(late.ReleaseAt, DefaultPolicy())
	require.NoError(t, err)
	from, to := late.RestoreWindow(rules)
	require.Equal(t, late.ReleaseAt, from)
	require.Equal(t, late.End, to)
	b := late
	_, err = b.Restore(late.End.Add(-ms), 0, "user:alice", rules)
	require.NoError(t, err)
	b = late
	_, err = b.Restore(late.End, 0, "user:alice", rules)
	require.ErrorIs(t, err, ErrRestoreWindowClosed)

	// Without a recorded release the window is measured from release_at: one answer everywhere.
	nort := released(rel)
	nort.ReleasedAt = nil
	from, _ = nort.RestoreWindow(rules)
	require.Equal(t, nort.ReleaseAt, from)
}

func TestCancel(t *testing.T) {
	t.Parallel()
	user := Actor{UserID: "alice", Role: RoleUser}
	admin := Actor{UserID: "ops", Role: RoleAdmin}
	p := DefaultPolicy()
	before := t0.Add(-time.Hour)

	b := confirmed()
	c, err := b.Cancel(user, before, p)
	require.NoError(t, err)
	require.Equal(t, CancelledByUser, b.Status)
	require.True(t, c.FreesUnits() && c.DropTimers)
	require.Equal(t, "user:alice", c.Actor)
	require.Equal(t, EventCancelled, c.Event())
	require.Equal(t, &Refund{Percent: 100, Reason: RefundUserCancel}, c.Refund, "the default policy refunds in full")
	c, err = b.Cancel(user, before.Add(time.Minute), p)
	require.NoError(t, err)
	require.True(t, c.None(), "a repeated cancel changes nothing")
	require.Equal(t, before, *b.CancelledAt)

	a := confirmed()
	_, err = a.CheckIn(t0, "staff:desk", rules)
	require.NoError(t, err)
	_, err = a.Cancel(user, before, p)
	require.ErrorIs(t, err, ErrInvalidTransition, "a checked-in guest cannot cancel")
	c, err = a.Cancel(admin, t0, p)
	require.NoError(t, err)
	require.Equal(t, CancelledByAdmin, a.Status)
	require.Equal(t, &Refund{Percent: 100, Reason: RefundAdminCancel}, c.Refund, "admin cancels are refunded in full")

	r := released(t0.Add(15 * time.Minute))
	_, err = r.Cancel(admin, t0.Add(time.Hour), p)
	require.ErrorIs(t, err, ErrInvalidTransition)
}

// The cancel cut-off: before it the user gets cancel_refund_percent, from it (inclusive) until start
// late_cancel_refund_percent, from start (inclusive) no cancel at all; an admin always, in full.
func TestCancelCutoffBoundaries(t *testing.T) {
	t.Parallel()
	user := Actor{UserID: "alice", Role: RoleUser}
	p, err := DefaultPolicy().With(PolicyInput{CancelCutoffMinutes: ptr(120), CancelRefundPercent: ptr(90), LateCancelRefundPercent: ptr(30)})
	require.NoError(t, err)
	cutoff := t0.Add(-2 * time.Hour)
	for _, c := range []struct {
		at      time.Time
		percent int
		reason  string
		err     error
	}{
		{cutoff.Add(-ms), 90, RefundUserCancel, nil},
		{cutoff, 30, RefundLateCancel, nil},
		{t0.Add(-ms), 30, RefundLateCancel, nil},
		{t0, 0, "", ErrCancellationClosed},
		{t0.Add(time.Hour), 0, "", ErrCancellationClosed},
	} {
		b := confirmed()
		ch, err := b.Cancel(user, c.at, p)
		if c.err != nil {
			require.ErrorIs(t, err, c.err, "cancel at %s", c.at)
			require.Equal(t, Confirmed, b.Status, "a refused cancel changes nothing")
			continue
		}
		require.NoError(t, err)
		require.Equal(t, &Refund{Percent: c.percent, Reason: c.reason}, ch.Refund, "cancel at %s", c.at)
	}
	none, err := DefaultPolicy().With(PolicyInput{CancelRefundPercent: ptr(0)})
	require.NoError(t, err)
	b := confirmed()
	ch, err := b.Cancel(user, t0.Add(-time.Hour), none)
	require.NoError(t, err)
	require.Nil(t, ch.Refund, "nothing to give back")
	require.Equal(t, int64(2499), Refund{Percent: 50}.Amount(4999), "rounded down to the cent")
}

// Notice and days ahead: a window starting inside the notice is too soon (its start inclusive at the
// notice's end), a day at or past max_days_ahead is too far.
func TestSaleWindowBoundaries(t *testing.T) {
	t.Parallel()
	p, err := DefaultPolicy().With(PolicyInput{MinNoticeMinutes: ptr(60), MaxDaysAhead: ptr(3)})
	require.NoError(t, err)
	require.True(t, p.TooSoon(t0, t0.Add(-60*time.Minute+ms)))
	require.False(t, p.TooSoon(t0, t0.Add(-60*time.Minute)), "exactly the notice is enough")
	require.True(t, p.TooSoon(t0, t0.Add(time.Minute)), "a slot in progress is too soon under a notice")
	require.False(t, DefaultPolicy().TooSoon(t0, t0.Add(time.Minute)), "without a notice a slot in progress sells")
	today := LocalDay(t0, shanghai)
	require.False(t, p.TooFar(today.AddDate(0, 0, 2), t0, shanghai), "today and the next two days")
	require.True(t, p.TooFar(today.AddDate(0, 0, 3), t0, shanghai))
	require.False(t, DefaultPolicy().TooFar(today.AddDate(0, 0, 300), t0, shanghai), "0: the schedule's horizon decides")

	_, err = DefaultPolicy().With(PolicyInput{CancelRefundPercent: ptr(101)})
	require.ErrorIs(t, err, Invalid("invalid_policy", ""))
	_, err = DefaultPolicy().With(PolicyInput{MaxDaysAhead: ptr(-1)})
	require.ErrorIs(t, err, Invalid("invalid_policy", ""))
	back, err := p.With(PolicyInput{MaxDaysAhead: ptr(0)})
	require.NoError(t, err, "0 goes back to the schedule's horizon")
	require.False(t, back.TooFar(today.AddDate(0, 0, 30), t0, shanghai))
	kept, err := p.With(PolicyInput{NoshowRefundPercent: ptr(50)})
	require.NoError(t, err)
	require.Equal(t, time.Hour, kept.MinNotice, "fields left out keep their value")
	require.Equal(t, 50, kept.NoshowRefund)
}

// A no-show under a policy that refunds part of it is refunded that part.
func TestNoShowRefund(t *testing.T) {
	t.Parallel()
	half, err := DefaultPolicy().With(PolicyInput{NoshowRefundPercent: ptr(50)})
	require.NoError(t, err)
	b := confirmed()
	c, err := b.Release(b.ReleaseAt, half)
	require.NoError(t, err)
	require.Equal(t, &Refund{Percent: 50, Reason: RefundNoShow}, c.Refund)
	d := confirmed()
	c, err = d.Release(d.ReleaseAt, DefaultPolicy())
	require.NoError(t, err)
	require.Nil(t, c.Refund, "no refund by default")
}

// A booking moves to another window of the same price until the reschedule cut-off (exclusive), at
// most max_reschedules times; release_at follows the new window.
func TestReschedule(t *testing.T) {
	t.Parallel()
	p, err := DefaultPolicy().With(PolicyInput{RescheduleCutoffMinutes: ptr(60), MaxReschedules: ptr(1)})
	require.NoError(t, err)
	to := Placement{Start: t0.Add(2 * time.Hour), End: t0.Add(3*time.Hour + 30*time.Minute),
		OccupyStart: t0.Add(2 * time.Hour), OccupyEnd: t0.Add(3*time.Hour + 30*time.Minute)}
	b := confirmed()
	_, err = b.Reschedule(to, 2, 15*time.Minute, "user:alice", t0.Add(-time.Hour), p)
	require.ErrorIs(t, err, ErrRescheduleClosed, "at the cut-off")
	c, err := b.Reschedule(to, 2, 15*time.Minute, "user:alice", t0.Add(-time.Hour-ms), p)
	require.NoError(t, err)
	require.Equal(t, EventRescheduled, c.Event())
	require.True(t, c.Moved && c.NewReleaseAt)
	require.Equal(t, Confirmed, b.Status)
	require.Equal(t, to.Start, b.Start)
	require.Equal(t, uint64(2), b.ResourceID)
	require.Equal(t, to.Start.Add(15*time.Minute), b.ReleaseAt)
	same, err := b.Reschedule(to, 2, 15*time.Minute, "user:alice", t0.Add(-2*time.Hour), p)
	require.NoError(t, err, "asking again for the window it is in is a retry, not a second move")
	require.False(t, same.Moved)
	require.Equal(t, 1, b.Reschedules)
	later := to
	later.Start, later.End = to.Start.Add(time.Hour), to.End.Add(time.Hour)
	later.OccupyStart, later.OccupyEnd = later.Start, later.End
	_, err = b.Reschedule(later, 2, 15*time.Minute, "user:alice", t0.Add(-2*time.Hour), p)
	require.ErrorIs(t, err, ErrRescheduleLimit)

	dear := to
	dear.AmountCents = 1
	d := confirmed()
	_, err = d.Reschedule(dear, 2, 0, "user:alice", t0.Add(-3*time.Hour), p)
	require.ErrorIs(t, err, ErrPriceDiffers)
	r := released(t0.Add(15 * time.Minute))
	_, err = r.Reschedule(to, 2, 0, "user:alice", t0.Add(-3*time.Hour), p)
	require.ErrorIs(t, err, ErrInvalidTransition)
}

// The no-show freeze: a user over max_noshows within the window (docs/API.md: "a user over it gets
// 403 account_frozen") is frozen for freeze_days from the latest; max_noshows of them are allowed.
func TestNoshowFreeze(t *testing.T) {
	t.Parallel()
	p, err := ParseNoshowPolicy(NoshowPolicyInput{MaxNoshows: 2, WithinDays: 30, FreezeDays: 7})
	require.NoError(t, err)
	day := 24 * time.Hour
	require.True(t, p.FrozenUntil([]time.Time{t0.Add(-3 * day)}, time.Time{}, t0).IsZero(), "one is under the maximum")
	require.True(t, p.FrozenUntil([]time.Time{t0.Add(-10 * day), t0.Add(-3 * day)}, time.Time{}, t0).IsZero(),
		"two are at the maximum, not over it")
	shows := []time.Time{t0.Add(-12 * day), t0.Add(-10 * day), t0.Add(-3 * day)}
	require.Equal(t, t0.Add(4*day), p.FrozenUntil(shows, time.Time{}, t0), "the third is over: frozen for 7 days from the latest")
	require.True(t, p.FrozenUntil(shows, time.Time{}, t0.Add(4*day)).IsZero(), "free at the end of the freeze")
	require.True(t, p.FrozenUntil([]time.Time{t0.Add(-31 * day), t0.Add(-10 * day), t0.Add(-3 * day)}, time.Time{}, t0).IsZero(), "an old one does not count")
	// An unfreeze pardons the no-shows up to it: only new ones count, and enough of them freeze again.
	require.True(t, p.FrozenUntil(shows, t0.Add(-day), t0).IsZero(), "pardoned")
	again := append(shows, t0.Add(day), t0.Add(2*day))
	require.True(t, p.FrozenUntil(again, t0.Add(-day), t0.Add(2*day)).IsZero(), "two new ones are at the maximum")
	again = append(again, t0.Add(3*day))
	require.Equal(t, t0.Add(10*day), p.FrozenUntil(again, t0.Add(-day), t0.Add(3*day)), "a third new one freezes again")
	one, err := ParseNoshowPolicy(NoshowPolicyInput{MaxNoshows: 1, WithinDays: 30, FreezeDays: 7})
	require.NoError(t, err)
	require.True(t, one.FrozenUntil([]time.Time{t0.Add(-3 * day)}, time.Time{}, t0).IsZero(), "max_noshows 1 allows one")
	require.Equal(t, t0.Add(4*day), one.FrozenUntil([]time.Time{t0.Add(-5 * day), t0.Add(-3 * day)}, time.Time{}, t0), "and freezes at the second")
	require.True(t, NoshowPolicy{}.FrozenUntil(shows, time.Time{}, t0).IsZero(), "off by default")
	off, err := ParseNoshowPolicy(NoshowPolicyInput{MaxNoshows: 0, WithinDays: 30, FreezeDays: 7})
	require.NoError(t, err, "0 turns the freeze off")
	require.True(t, off.FrozenUntil(shows, time.Time{}, t0).IsZero())
	_, err = ParseNoshowPolicy(NoshowPolicyInput{MaxNoshows: 2, WithinDays: 0, FreezeDays: 7})
	require.ErrorIs(t, err, Invalid("invalid_policy", ""))
}

func ptr[T any](v T) *T { return &v }

func TestProgress(t *testing.T) {
	t.Parallel()
	b := confirmed()
	_, err := b.CheckIn(t0.Add(-10*time.Minute), "staff:desk", rules)
	require.NoError(t, err)
	c, err := b.Progress(t0.Add(-ms))
	require.NoError(t, err)
	require.True(t, c.None())
	c, err = b.Progress(t0)
	require.NoError(t, err)
	require.Equal(t, InProgress, b.Status)
	require.Equal(t, "", c.Event(), "starting is not announced")
	c, err = b.Progress(b.OccupyEnd.Add(-ms))
	require.NoError(t, err)
	require.True(t, c.None())
	c, err = b.Progress(b.OccupyEnd)
	require.NoError(t, err)
	require.Equal(t, Completed, b.Status)
	require.True(t, c.FreesUnits())

	// A guest checked in so late that the slot is over completes at once.
	late := confirmed()
	_, err = late.CheckIn(t0.Add(10*time.Minute), "staff:desk", rules)
	require.NoError(t, err)
	_, err = late.Progress(late.OccupyEnd.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, Completed, late.Status)
}

// A no-show is one per released booking and is taken back by a restore or a late check-in: the
// count is the number of bookings in a status that counts, so nothing can count twice.
func TestNoShowCountsOncePerBooking(t *testing.T) {
	t.Parallel()
	b := confirmed()
	_, err := b.Release(b.ReleaseAt, DefaultPolicy())
	require.NoError(t, err)
	require.True(t, b.Status.CountsAsNoShow())
	_, err = b.Restore(b.ReleaseAt.Add(time.Minute), 15*time.Minute, "user:alice", rules)
	require.NoError(t, err)
	require.False(t, b.Status.CountsAsNoShow(), "a restore takes the no-show back")
	_, err = b.Release(b.ReleaseAt, DefaultPolicy())
	require.NoError(t, err)
	require.True(t, b.Status.CountsAsNoShow(), "released again: still one booking, one no-show")
	_, err = b.CheckIn(b.ReleaseAt.Add(time.Minute), "staff:desk", rules)
	require.NoError(t, err)
	require.False(t, b.Status.CountsAsNoShow(), "a late arrival is not a no-show")
	for _, s := range Statuses() {
		require.Equal(t, s == Released, s.CountsAsNoShow(), s)
	}
}

func TestReleaseAtAndPhysicalWindow(t *testing.T) {
	t.Parallel()
	g := 15 * time.Minute
	require.Equal(t, t0.Add(g), ReleaseAt(t0, t0.Add(-time.Hour), g))
	require.Equal(t, t0.Add(g), ReleaseAt(t0, t0, g), "bought at the start")
	require.Equal(t, t0.Add(20*time.Minute+g), ReleaseAt(t0, t0.Add(20*time.Minute), g),
		"a slot bought after it started still gets its grace")
	from, to := PhysicalWindow(t0, t0.Add(50*time.Minute), 15*time.Minute, 15*time.Minute)
	require.Equal(t, t0.Add(-15*time.Minute), from)
	require.Equal(t, t0.Add(65*time.Minute), to)
}

func TestGracePeaks(t *testing.T) {
	t.Parallel()
	g, err := ParseGrace(GraceInput{Category: "court", GraceSeconds: 900, Peak: []PeakRule{
		{Weekdays: []int{1, 2, 3, 4, 5}, From: "18:00", To: "22:00", GraceSeconds: 300},
	}})
	require.NoError(t, err)
	mon := func(hhmm string) time.Time {
		c, err := ParseClock(hhmm)
		require.NoError(t, err)
		return time.Date(2026, 12, 7, 0, int(c), 0, 0, shanghai)
	}
	require.Equal(t, 15*time.Minute, g.For(mon("17:59"), shanghai))
	require.Equal(t, 5*time.Minute, g.For(mon("18:00"), shanghai), "a peak starts inclusive")
	require.Equal(t, 5*time.Minute, g.For(mon("21:59"), shanghai))
	require.Equal(t, 15*time.Minute, g.For(mon("22:00"), shanghai), "and ends exclusive")
	require.Equal(t, 15*time.Minute, g.For(mon("19:00").AddDate(0, 0, 5), shanghai), "Saturday is not a peak day")
	require.Equal(t, 5*time.Minute, g.For(mon("19:00").UTC(), shanghai), "judged in the venue's zone")
	policies := map[string]Grace{"court": g}
	require.Equal(t, 5*time.Minute, GraceFor(policies, "court", time.Hour, mon("19:00"), shanghai))
	require.Equal(t, time.Hour, GraceFor(policies, "desk", time.Hour, mon("19:00"), shanghai))

	for _, bad := range []GraceInput{
		{GraceSeconds: -1},
		{GraceSeconds: 86401},
		{Peak: []PeakRule{{Weekdays: []int{8}, From: "18:00", To: "19:00"}}},
		{Peak: []PeakRule{{Weekdays: []int{1}, From: "19:00", To: "18:00"}}},
		{Peak: []PeakRule{{Weekdays: []int{1}, From: "7pm", To: "20:00"}}},
		{Peak: []PeakRule{{Weekdays: []int{1}, From: "18:00", To: "19:00", GraceSeconds: -5}}},
	} {
		_, err := ParseGrace(bad)
		e, ok := AsError(err)
		require.True(t, ok, "%+v: %v", bad, err)
		require.Equal(t, KindInvalid, e.Kind)
		require.NotEmpty(t, e.Field)
	}
}

func TestHoldDeadlineRoundsUpToTheSecondShown(t *testing.T) {
	t.Parallel()
	now := t0.Add(250 * ms)
	require.Equal(t, t0.Add(10*time.Minute+time.Second), HoldDeadline(now, 10*time.Minute))
	require.Equal(t, t0.Add(10*time.Minute), HoldDeadline(t0, 10*time.Minute))
	d := HoldDeadline(now, 10*time.Minute)
	require.Equal(t, HoldHeld, EffectiveHoldStatus(HoldHeld, d, d.Add(-ms)))
	require.Equal(t, HoldExpired, EffectiveHoldStatus(HoldHeld, d, d), "a hold ends at its deadline")
	require.Equal(t, HoldConfirming, EffectiveHoldStatus(HoldConfirming, d, d.Add(time.Hour)), "a confirming hold does not expire")
}

func TestLimits(t *testing.T) {
	t.Parallel()
	require.NoError(t, CheckRange(FieldQuantity, 1))
	require.NoError(t, CheckRange(FieldQuantity, 1000))
	err := CheckRange(FieldQuantity, 1001)
	e, _ := AsError(err)
	require.Equal(t, "invalid_quantity", e.Code)
	require.Equal(t, "quantity", e.Field)
	require.Error(t, CheckRange(FieldCapacity, 0))
	require.Equal(t, "invalid_grace", CodeFor("peak.grace_seconds"))
	require.Equal(t, "invalid_number", CodeFor("whatever"))
	q, err := Quantity(0)
	require.NoError(t, err)
	require.Equal(t, 1, q)
	n, err := PageSize(0)
	require.NoError(t, err)
	require.Equal(t, 20, n)
	_, err = PageSize(101)
	require.Error(t, err)

	require.Error(t, CheckName("name", "  ", 200))
	require.Error(t, CheckName("name", "a\x00b", 200))
	require.Error(t, CheckName("name", string([]byte{0xff}), 200))
	require.NoError(t, CheckName("name", "网球场一号", 5), "counted in characters, not bytes")
	require.Error(t, CheckName("name", "网球场一号", 4))
}

func TestActorsSeeOnlyWhatIsTheirs(t *testing.T) {
	t.Parallel()
	b := confirmed()
	require.True(t, Actor{UserID: "alice", Role: RoleUser}.MaySee(&b))
	require.False(t, Actor{UserID: "mallory", Role: RoleUser}.MaySee(&b))
	require.True(t, Actor{UserID: "desk", Role: RoleStaff, VenueID: 7}.MaySee(&b))
	require.False(t, Actor{UserID: "desk", Role: RoleStaff, VenueID: 8}.MaySee(&b))
	require.False(t, Actor{Role: RoleUser}.MaySee(&Booking{}), "an empty user id owns nothing")
	require.True(t, Actor{UserID: "ops", Role: RoleAdmin}.MayChange("alice"))
	require.False(t, Actor{UserID: "desk", Role: RoleStaff, VenueID: 7}.MayChange("alice"))
	require.True(t, Actor{UserID: "desk", Role: RoleStaff, VenueID: 7}.MayCheckIn(7))
	require.False(t, Actor{UserID: "alice", Role: RoleUser}.MayCheckIn(7))
	require.Equal(t, "system", System.Name())
	require.NoError(t, Actor{UserID: "ops", Role: RoleAdmin}.RequireAdmin())
	require.ErrorIs(t, Actor{UserID: "desk", Role: RoleStaff, VenueID: 7}.RequireAdmin(), ErrForbidden)
	require.ErrorIs(t, Actor{UserID: "alice", Role: RoleUser}.RequireAdmin(), ErrForbidden)
}

func TestErrorsMatchByCode(t *testing.T) {
	t.Parallel()
	err := ErrScheduleConflict.WithDetail("booking_ids", []string{"1"})
	require.ErrorIs(t, err, ErrScheduleConflict)
	require.Nil(t, ErrScheduleConflict.Details, "details are added to a copy")
	require.False(t, errors.Is(err, ErrSlotFull))
	require.ErrorIs(t, Invalid("off_grid", "x"), ErrOffGrid)

	unknownResource := Unknown(ErrNotFound, "invalid_resource", "no resource %d", 9)
	e, ok := AsError(unknownResource)
	require.True(t, ok)
	require.Equal(t, KindInvalid, e.Kind, "an object a request names that does not exist makes the request invalid")
	require.Equal(t, "invalid_resource", e.Code)
	require.Equal(t, "no resource 9", e.Message)
	other := errors.New("mysql down")
	require.Same(t, other, Unknown(other, "invalid_resource", "x"), "other errors pass unchanged")
}

func TestReminderTime(t *testing.T) {
	t.Parallel()
	rel := t0.Add(15 * time.Minute)
	at, ok := ReminderAt(rel, 15*time.Minute, t0.Add(-ms))
	require.True(t, ok)
	require.Equal(t, t0, at)
	_, ok = ReminderAt(rel, 15*time.Minute, t0)
	require.False(t, ok, "a booking made at (or after) its reminder time gets no reminder")
	_, ok = ReminderAt(rel, 0, t0.Add(-time.Hour))
	require.False(t, ok, "no lead, no reminder")
}

func TestReleaseModes(t *testing.T) {
	t.Parallel()
	for _, mode := range []ReleaseMode{ReleaseOff, ReleaseDryRun} {
		b := confirmed()
		_, err := b.Decide(b.ReleaseAt.Add(-ms), mode, DefaultPolicy())
		var nd *NotDueError
		require.ErrorAs(t, err, &nd, "never early, whatever the mode")
		c, err := b.Decide(b.ReleaseAt, mode, DefaultPolicy())
		require.NoError(t, err)
		require.Equal(t, Confirmed, b.Status, "%s keeps the booking CONFIRMED", mode)
		require.False(t, c.FreesUnits())
		require.Equal(t, mode, c.HeldBy)
		if mode == ReleaseDryRun {
			require.Equal(t, EventReleaseSkipped, c.Event())
		} else {
			require.Equal(t, "", c.Event(), "off decides nothing and says nothing")
		}
		again, err := b.Decide(b.ReleaseAt.Add(time.Minute), ReleaseOn, DefaultPolicy())
		require.NoError(t, err)
		require.True(t, again.None(), "a release held back is not released later, even once the mode is on")
		// The guest may still arrive until the end of the slot.
		_, err = b.CheckIn(b.End.Add(-ms), "staff:desk", rules)
		require.NoError(t, err)
	}
	b := confirmed()
	c, err := b.Decide(b.ReleaseAt, ReleaseOn, DefaultPolicy())
	require.NoError(t, err)
	require.Equal(t, Released, b.Status)
	require.True(t, c.FreesUnits())
	_, err = ParseReleaseMode("sometimes")
	require.ErrorIs(t, err, Invalid("invalid_release_mode", ""))
}

// The capacity ledger and the counters both follow Change.Units: every change into an occupying
// status takes units, every change out of one gives them back, a move does both, and nothing else
// touches them.
func TestUnitsFollowOccupancy(t *testing.T) {
	t.Parallel()
	for _, tr := range append(Transitions(), Created) {
		c := Change{From: tr.From, To: tr.To}
		u := c.Units()
		require.Equal(t, !tr.From.Occupies() && tr.To.Occupies(), u.Take, "%s → %s takes", tr.From, tr.To)
		require.Equal(t, tr.From.Occupies() && !tr.To.Occupies(), u.Give, "%s → %s gives", tr.From, tr.To)
		require.Equal(t, u.Take, c.TakesUnits())
		require.Equal(t, u.Give, c.FreesUnits())
	}
	require.Equal(t, Units{Take: true}, Change{From: Created.From, To: Created.To}.Units(), "a new booking takes its units")
	require.Equal(t, Units{Give: true}, Change{From: Confirmed, To: Released}.Units())
	require.Equal(t, Units{Take: true}, Change{From: Released, To: Arrived}.Units(), "a check-in after the release takes them again")
	require.Equal(t, Units{}, Change{From: Confirmed, To: Arrived}.Units(), "a check-in in time keeps them")
	require.Equal(t, Units{}, Change{}.Units(), "the zero change touches nothing")

	moved := Change{From: Confirmed, To: Confirmed, Moved: true}
	require.Equal(t, Units{Give: true, Take: true}, moved.Units())
	require.False(t, moved.TakesUnits() || moved.FreesUnits(), "a move's units are reserved and handed over by the move's own steps")

	b := confirmed()
	held, err := b.Decide(b.ReleaseAt, ReleaseDryRun, DefaultPolicy())
	require.NoError(t, err)
	require.Equal(t, Units{}, held.Units(), "a release held back keeps the units")
}

// A desk's scanner may send the code typed by hand or the QR code's whole payload: both name the
// same booking, and a payload names the code it was made of.
func TestScannedCheckinCode(t *testing.T) {
	for in, want := range map[string]string{
		"K7QX4MPA":         "K7QX4MPA",
		" k7qx4mpa ":       "K7QX4MPA",
		"SWCHK:K7QX4MPA":   "K7QX4MPA",
		"swchk:k7qx4mpa\n": "K7QX4MPA",
		"SWCHK:":           "",
		"":                 "",
	} {
		if got := ScannedCheckinCode(in); got != want {
			t.Errorf("ScannedCheckinCode(%q) = %q, want %q", in, got, want)
		}
	}
	if got := ScannedCheckinCode(CheckinQRPayload("P8WTT7QZ")); got != "P8WTT7QZ" {
		t.Errorf("a payload's code is %q", got)
	}
}

// DetailsIn renders every time detail of an error in the venue's zone (the one home of that
// conversion: a check-in's opens_at, a freeze's until), leaving the rest and other errors alone.
func TestDetailsIn(t *testing.T) {
	t.Parallel()
	sh, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	at := time.Date(2026, 12, 7, 1, 30, 0, 0, time.UTC)
	in := ErrTooEarly.WithDetail("opens_at", at).WithDetail("count", 3)
	got, ok := AsError(DetailsIn(in, sh))
	require.True(t, ok)
	require.Equal(t, "2026-12-07T09:30:00+08:00", got.Details["opens_at"].(time.Time).Format(time.RFC3339))
	require.Equal(t, 3, got.Details["count"])
	require.Equal(t, time.UTC, in.Details["opens_at"].(time.Time).Location(), "the error given is not changed")
	plain := errors.New("plain")
	require.Same(t, plain, DetailsIn(plain, sh))
	require.Same(t, in, DetailsIn(in, nil).(*Error))
}
