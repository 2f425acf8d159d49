package booking

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzPolicy sets a resource's booking rules and the no-show policy from any numbers (present
// says which policy fields the request carries, one bit each). A refusal blames the first field out
// of its documented range, with that field's code; an accepted policy holds exactly what was sent
// (fields left out keep their value), and the decisions made under it — cancel, reschedule, the
// no-show release, the freeze — stay inside their documented bounds.
func FuzzPolicy(f *testing.F) {
	f.Fuzz(func(t *testing.T, present uint8, minNotice, maxDays, cancelCut, cancelRefund, lateRefund, noshowRefund,
		rescheduleCut, maxReschedules, maxNoshows, withinDays, freezeDays int, startSec int64, atSec int32, admin bool,
		moves uint8, paid int64) {
		values := []int{minNotice, maxDays, cancelCut, cancelRefund, lateRefund, noshowRefund, rescheduleCut, maxReschedules}
		fields := []Field{FieldMinNotice, FieldMaxDaysAhead, FieldCancelCutoff, FieldCancelRefund, FieldLateRefund,
			FieldNoshowRefund, FieldRescheduleCut, FieldMaxReschedules}
		var in PolicyInput
		ptrs := []**int{&in.MinNoticeMinutes, &in.MaxDaysAhead, &in.CancelCutoffMinutes, &in.CancelRefundPercent,
			&in.LateCancelRefundPercent, &in.NoshowRefundPercent, &in.RescheduleCutoffMinutes, &in.MaxReschedules}
		var blame Field
		for i := range values {
			if present&(1<<i) == 0 {
				continue
			}
			*ptrs[i] = &values[i]
			if l := limits[fields[i]]; blame == "" && (int64(values[i]) < l.min || int64(values[i]) > l.max) {
				blame = fields[i]
			}
		}
		before := DefaultPolicy()
		p, err := before.With(in)
		if blame != "" {
			e, ok := AsError(err)
			require.True(t, ok, "an out-of-range %s is accepted: %v", blame, err)
			require.Equal(t, KindInvalid, e.Kind)
			require.Equal(t, limits[blame].code, e.Code)
			require.Equal(t, string(blame), e.Field)
			return
		}
		require.NoError(t, err)
		got := []int{int(p.MinNotice / time.Minute), p.MaxDaysAhead, int(p.CancelCutoff / time.Minute), p.CancelRefund,
			p.LateCancelRefund, p.NoshowRefund, int(p.RescheduleCutoff / time.Minute), p.MaxReschedules}
		kept := []int{int(before.MinNotice / time.Minute), before.MaxDaysAhead, int(before.CancelCutoff / time.Minute),
			before.CancelRefund, before.LateCancelRefund, before.NoshowRefund, int(before.RescheduleCutoff / time.Minute),
			before.MaxReschedules}
		for i := range values {
			want := kept[i]
			if present&(1<<i) != 0 {
				want = values[i]
			}
			require.Equal(t, want, got[i], "%s", fields[i])
		}

		if startSec < -1<<40 || startSec > 1<<40 {
			return // beyond any booking's start
		}
		start := time.Unix(startSec, 0).UTC()
		now := start.Add(time.Duration(atSec) * time.Second)
		paid = max(paid, 0) % (limits[FieldAmountCents].max + 1)
		checkRefund := func(r *Refund) {
			if r == nil {
				return
			}
			require.True(t, r.Percent > 0 && r.Percent <= 100, "refund of %d%%", r.Percent)
			amount := r.Amount(paid)
			require.True(t, amount >= 0 && amount <= paid, "refund of %d for %d paid", amount, paid)
		}

		// Cancel: an admin any time and in full; the user before start only, by the cut-off's share.
		b := Booking{ID: 1, UserID: "u", Status: Confirmed, Start: start, End: start.Add(time.Hour),
			ReleaseAt: start.Add(15 * time.Minute), AmountCents: paid, Reschedules: int(moves)}
		a := Actor{UserID: "u", Role: RoleUser}
		if admin {
			a.Role = RoleAdmin
		}
		cancelled := b
		c, err := cancelled.Cancel(a, now, p)
		switch {
		case admin:
			require.NoError(t, err)
			require.Equal(t, &Refund{Percent: 100, Reason: RefundAdminCancel}, c.Refund)
		case !now.Before(start):
			require.ErrorIs(t, err, ErrCancellationClosed)
		default:
			require.NoError(t, err)
			want := Refund{Percent: p.CancelRefund, Reason: RefundUserCancel}
			if !now.Before(start.Add(-p.CancelCutoff)) {
				want = Refund{Percent: p.LateCancelRefund, Reason: RefundLateCancel}
			}
			if want.Percent == 0 {
				require.Nil(t, c.Refund, "a refund of nothing")
			} else {
				require.Equal(t, &want, c.Refund)
			}
		}
		checkRefund(c.Refund)

		// Reschedule: before the cut-off, fewer times than allowed, at the same price.
		moved := b
		to := Placement{Start: start.Add(time.Hour), End: start.Add(2 * time.Hour), AmountCents: paid}
		to.OccupyStart, to.OccupyEnd = to.Start, to.End
		_, err = moved.Reschedule(to, 1, time.Minute, "u", now, p)
		switch {
		case !now.Before(start.Add(-p.RescheduleCutoff)):
			require.ErrorIs(t, err, ErrRescheduleClosed)
		case int(moves) >= p.MaxReschedules:
			require.ErrorIs(t, err, ErrRescheduleLimit)
		default:
			require.NoError(t, err)
			require.Equal(t, int(moves)+1, moved.Reschedules)
		}

		// The no-show release refunds the no-show's share, never early.
		released := b
		c, err = released.Release(now, p)
		if now.Before(b.ReleaseAt) {
			var nd *NotDueError
			require.ErrorAs(t, err, &nd)
			require.True(t, nd.Wait > 0)
		} else {
			require.NoError(t, err)
			require.Equal(t, Released, released.Status)
			checkRefund(c.Refund)
		}

		// The freeze: on, a user with enough recent no-shows is frozen until after now, never longer
		// than the freeze from the latest of them.
		np, err := ParseNoshowPolicy(NoshowPolicyInput{MaxNoshows: maxNoshows, WithinDays: withinDays, FreezeDays: freezeDays})
		for _, x := range []struct {
			field Field
			v     int
		}{{FieldMaxNoshows, maxNoshows}, {FieldWithinDays, withinDays}, {FieldFreezeDays, freezeDays}} {
			if l := limits[x.field]; int64(x.v) < l.min || int64(x.v) > l.max {
				e, ok := AsError(err)
				require.True(t, ok, "an out-of-range %s is accepted: %v", x.field, err)
				require.Equal(t, string(x.field), e.Field)
				return
			}
		}
		require.NoError(t, err)
		noshows := []time.Time{start, start.Add(-time.Duration(atSec) * time.Second), now.Add(-24 * time.Hour), now}
		until := np.FrozenUntil(noshows, time.Time{}, now)
		if !until.IsZero() {
			require.True(t, np.MaxNoshows > 0 && until.After(now), "frozen until %v at %v", until, now)
			require.False(t, until.After(now.Add(np.Freeze)), "frozen for longer than the freeze")
		}
	})
}

// FuzzGrace sets a category's grace with one peak window from any text and numbers. A refusal is a
// KindInvalid error naming the field at fault; an accepted grace gives every start either the
// category's grace or the peak's — the peak's exactly when the venue-local start falls on one of its
// weekdays within [from, to).
func FuzzGrace(f *testing.F) {
	f.Fuzz(func(t *testing.T, category string, grace int, weekdays []byte, from, to string, peakGrace int, startSec int64, zone uint8) {
		days := make([]int, len(weekdays))
		for i, d := range weekdays {
			days[i] = int(int8(d))
		}
		g, err := ParseGrace(GraceInput{Category: category, GraceSeconds: grace,
			Peak: []PeakRule{{Weekdays: days, From: from, To: to, GraceSeconds: peakGrace}}})
		if err != nil {
			e, ok := AsError(err)
			require.True(t, ok, "%v is not a domain error", err)
			require.Equal(t, KindInvalid, e.Kind)
			require.Contains(t, []string{"category", "grace_seconds", "peak[0].weekdays", "peak[0].from", "peak[0].to",
				"peak[0]", "peak[0].grace_seconds"}, e.Field, "%v", err)
			return
		}
		require.NoError(t, CheckOptionalText("category", category, MaxTagLen))
		require.NoError(t, ValidateWeekdays("weekdays", days))
		lo, err := ParseClock(from)
		require.NoError(t, err)
		hi, err := ParseClock(to)
		require.NoError(t, err)
		require.Less(t, lo, hi)
		loc := zoneFor(t, zone).loc
		start := time.Unix(startSec%(1<<40), 0)
		local := start.In(loc)
		inPeak := false
		for _, d := range days {
			inPeak = inPeak || d == IsoWeekday(local)
		}
		inPeak = inPeak && MinuteOfDay(local) >= lo && MinuteOfDay(local) < hi
		want := time.Duration(grace) * time.Second
		if inPeak {
			want = time.Duration(peakGrace) * time.Second
		}
		got := g.For(start, loc)
		require.Equal(t, want, got, "grace of a start at %v", local)
		require.True(t, got >= 0 && got <= 24*time.Hour)
	})
}
