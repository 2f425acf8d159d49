package booking

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pending is the 10:00–11:30 booking of confirmed, paid at 09:00 for a resource that requires
// approval within two hours: it waits until its start, 10:00.
func pending(t *testing.T) Booking {
	t.Helper()
	b := confirmed()
	p := DefaultPolicy()
	p.RequiresApproval, p.ApprovalWindow = true, 2*time.Hour
	b.Status, b.ReleaseAt = Open(p, b.Start, b.End, b.ConfirmedAt, 15*time.Minute)
	require.Equal(t, PendingApproval, b.Status)
	return b
}

func TestOpenWithoutApprovalConfirmsAtStartPlusGrace(t *testing.T) {
	t.Parallel()
	st, at := Open(DefaultPolicy(), t0, t0.Add(time.Hour), t0.Add(-time.Hour), 15*time.Minute)
	require.Equal(t, Confirmed, st)
	require.Equal(t, t0.Add(15*time.Minute), at)
}

func TestApprovalDeadlineIsTheWindowButNeverPastTheStart(t *testing.T) {
	t.Parallel()
	end := t0.Add(time.Hour)
	require.Equal(t, t0.Add(-2*time.Hour), ApprovalDeadline(time.Hour, t0, end, t0.Add(-3*time.Hour)), "window ends first")
	require.Equal(t, t0, ApprovalDeadline(2*time.Hour, t0, end, t0.Add(-time.Hour)), "capped at the start")
	require.Equal(t, end, ApprovalDeadline(2*time.Hour, t0, end, t0.Add(10*time.Minute)), "a slot in progress: at most its end")
	p := DefaultPolicy()
	p.RequiresApproval = true
	_, at := Open(p, t0.Add(72*time.Hour), t0.Add(73*time.Hour), t0, 0)
	require.Equal(t, t0.Add(DefaultApprovalWindow), at, "no window set: the default")
}

func TestPendingBookingOccupiesItsUnits(t *testing.T) {
	t.Parallel()
	require.True(t, PendingApproval.Occupies())
	require.Contains(t, OccupyingStatuses(), PendingApproval)
	require.False(t, Declined.Occupies())
	require.Equal(t, Units{Give: true}, Change{From: PendingApproval, To: Declined}.Units())
	require.Equal(t, Units{}, Change{From: PendingApproval, To: Confirmed}.Units(), "approval keeps the units it has")
	require.Equal(t, Units{Take: true}, Change{From: Status(HoldHeld), To: PendingApproval}.Units())
}

func TestApproveConfirmsAndStartsTheReleaseClock(t *testing.T) {
	t.Parallel()
	b := pending(t)
	c, err := b.Approve(t0.Add(-30*time.Minute), 15*time.Minute, "staff:desk", "member")
	require.NoError(t, err)
	require.Equal(t, Confirmed, b.Status)
	require.Equal(t, t0.Add(15*time.Minute), b.ReleaseAt)
	require.True(t, c.DropTimers && c.NewReleaseAt, "the deadline's task goes, a release task comes")
	require.Equal(t, "approved: member", c.Reason)
	require.Equal(t, EventConfirmed, c.Event())
	require.Nil(t, c.Refund)

	_, err = b.Approve(t0, 0, "staff:desk", "")
	require.ErrorIs(t, err, ErrNotPendingApproval, "approving twice is refused, not repeated")
}

func TestApproveAtOrAfterTheDeadlineIsRefused(t *testing.T) {
	t.Parallel()
	b := pending(t)
	_, err := b.Approve(b.ReleaseAt, time.Minute, "staff:desk", "")
	require.ErrorIs(t, err, ErrApprovalLapsed)
	require.Equal(t, PendingApproval, b.Status)
}

func TestDeclineGivesBackUnitsAndRefundsInFull(t *testing.T) {
	t.Parallel()
	b := pending(t)
	c, err := b.Decline(t0.Add(-time.Hour), "staff:desk", "court under repair")
	require.NoError(t, err)
	require.Equal(t, Declined, b.Status)
	require.True(t, c.FreesUnits() && c.DropTimers)
	require.Equal(t, &Refund{Percent: 100, Reason: RefundDeclined}, c.Refund)
	require.Equal(t, EventDeclined, c.Event())
	again, err := b.Decline(t0, "staff:desk", "")
	require.NoError(t, err)
	require.True(t, again.None(), "a repeated decline changes nothing")

	c2 := confirmed()
	_, err = c2.Decline(t0, "staff:desk", "x")
	require.ErrorIs(t, err, ErrNotPendingApproval)
}

func TestDeadlineDeclinesNeverEarlyWhateverTheReleaseMode(t *testing.T) {
	t.Parallel()
	for _, mode := range []ReleaseMode{ReleaseOn, ReleaseOff, ReleaseDryRun} {
		b := pending(t)
		_, err := b.Decide(b.ReleaseAt.Add(-ms), mode, DefaultPolicy())
		var nd *NotDueError
		require.True(t, errors.As(err, &nd), "one millisecond early: not due")
		require.Equal(t, ms, nd.Wait)
		c, err := b.Decide(b.ReleaseAt, mode, DefaultPolicy())
		require.NoError(t, err)
		require.Equal(t, Declined, b.Status, mode)
		require.Equal(t, ActorSystem, c.Actor)
		require.Equal(t, 100, c.Refund.Percent)
		again, err := b.Decide(b.ReleaseAt.Add(time.Second), mode, DefaultPolicy())
		require.NoError(t, err)
		require.True(t, again.None(), "decided once")
	}
}

func TestPendingBookingCannotBeCheckedInOrMoved(t *testing.T) {
	t.Parallel()
	b := pending(t)
	_, err := b.CheckIn(t0, "staff:desk", rules)
	require.ErrorIs(t, err, ErrAwaitingApproval)
	_, err = b.Reschedule(Placement{Start: t0.Add(time.Hour), End: t0.Add(2 * time.Hour)}, 0, 0, "user:alice", t0.Add(-2*time.Hour), DefaultPolicy())
	require.ErrorIs(t, err, ErrInvalidTransition)
}

func TestGuestWithdrawingAPendingBookingGetsEverythingBack(t *testing.T) {
	t.Parallel()
	b := pending(t)
	p := DefaultPolicy()
	p.CancelCutoff, p.LateCancelRefund = 24*time.Hour, 10
	c, err := b.Cancel(Actor{UserID: "alice", Role: RoleUser}, t0.Add(-time.Hour), p)
	require.NoError(t, err)
	require.Equal(t, CancelledByUser, b.Status)
	require.Equal(t, 100, c.Refund.Percent)
}

func TestAdminCancelRefundsInFullOrByPolicy(t *testing.T) {
	t.Parallel()
	p := DefaultPolicy()
	p.CancelCutoff, p.CancelRefund, p.LateCancelRefund, p.NoshowRefund = time.Hour, 90, 50, 0
	staff := Actor{UserID: "desk", Role: RoleStaff, VenueID: 7}
	for _, tc := range []struct {
		at      time.Time
		full    bool
		percent int // 0: no refund row
	}{
		{t0.Add(-2 * time.Hour), true, 100},
		{t0.Add(-2 * time.Hour), false, 90},
		{t0.Add(-30 * time.Minute), false, 50},
		{t0.Add(5 * time.Minute), false, 0},
		{t0.Add(5 * time.Minute), true, 100},
	} {
		b := confirmed()
		c, err := b.AdminCancel(staff, tc.at, p, tc.full, "rain")
		require.NoError(t, err)
		require.Equal(t, CancelledByAdmin, b.Status)
		require.Equal(t, "cancelled: rain", c.Reason)
		require.Equal(t, "staff:desk", c.Actor)
		if tc.percent == 0 {
			require.Nil(t, c.Refund)
		} else {
			require.Equal(t, tc.percent, c.Refund.Percent, "%v full=%v", tc.at, tc.full)
		}
	}
	b := released(t0.Add(15 * time.Minute))
	_, err := b.AdminCancel(staff, t0.Add(20*time.Minute), p, true, "x")
	require.ErrorIs(t, err, ErrInvalidTransition, "a released booking has no units to give back")
}

func TestAppealRestoresPastTheOwnersWindowUntilTheEnd(t *testing.T) {
	t.Parallel()
	b := released(t0.Add(15 * time.Minute))
	late := t0.Add(15*time.Minute + rules.RestoreWindow + time.Minute)
	_, err := b.Restore(late, time.Minute, "user:alice", rules)
	require.ErrorIs(t, err, ErrRestoreWindowClosed, "the owner's own window is over")
	c, err := b.Appeal(late, 10*time.Minute, "staff:desk", "phone died")
	require.NoError(t, err)
	require.Equal(t, Confirmed, b.Status)
	require.Equal(t, late.Add(10*time.Minute), b.ReleaseAt)
	require.Nil(t, b.ReleasedAt)
	require.True(t, c.TakesUnits() && c.NewReleaseAt)
	require.Equal(t, EventRestored, c.Event())

	b = released(t0.Add(15 * time.Minute))
	_, err = b.Appeal(b.End, time.Minute, "staff:desk", "x")
	require.ErrorIs(t, err, ErrRestoreWindowClosed, "not at or after the slot's end")
}

func TestReasonIsRequiredAndBounded(t *testing.T) {
	t.Parallel()
	_, err := Reason("  ", true)
	require.ErrorIs(t, err, ErrReasonRequired)
	r, err := Reason("  no-show appeal ", true)
	require.NoError(t, err)
	require.Equal(t, "no-show appeal", r)
	r, err = Reason("", false)
	require.NoError(t, err)
	require.Empty(t, r)
	_, err = Reason(strings.Repeat("很", 161), false)
	require.Error(t, err)
}

func TestPolicyApprovalFields(t *testing.T) {
	t.Parallel()
	yes, window, zero := true, 90, 0
	p, err := DefaultPolicy().With(PolicyInput{RequiresApproval: &yes, ApprovalWindowMinutes: &window})
	require.NoError(t, err)
	require.True(t, p.RequiresApproval)
	require.Equal(t, 90*time.Minute, p.ApprovalWindow)
	_, err = p.With(PolicyInput{ApprovalWindowMinutes: &zero})
	e, ok := AsError(err)
	require.True(t, ok)
	require.Equal(t, "invalid_policy", e.Code)
}

func TestParseRefund(t *testing.T) {
	for in, want := range map[string]bool{"": true, "full": true, "policy": false} {
		full, err := ParseRefund(in)
		if err != nil || full != want {
			t.Errorf("ParseRefund(%q) = %v, %v; want %v", in, full, err, want)
		}
	}
	for _, in := range []string{"FULL", "half", " full"} {
		if _, err := ParseRefund(in); err == nil || err.(*Error).Code != "invalid_refund" {
			t.Errorf("ParseRefund(%q) = %v; want invalid_refund", in, err)
		}
	}
}
