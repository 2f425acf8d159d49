package booking

import "time"

// Policy is a resource's booking rules (docs/API.md "Booking rules"): how soon and how far ahead it
// can be booked, until when and for how much of the price a booking can be cancelled, what a
// no-show gets back, and how often and until when a booking can be moved.
type Policy struct {
	MinNotice    time.Duration // a slot must start at least this long after the hold; 0: slots in progress too
	MaxDaysAhead int           // venue-local days ahead, today included; 0: the schedule's horizon
	// CancelCutoff: a user's cancel at least this long before start gets CancelRefund percent, a later
	// one LateCancelRefund; from start on the user cannot cancel (the no-show path applies).
	CancelCutoff     time.Duration
	CancelRefund     int
	LateCancelRefund int
	NoshowRefund     int           // percent of a released no-show's payment given back
	RescheduleCutoff time.Duration // a booking can be moved until this long before its start
	MaxReschedules   int           // how often a booking can be moved
	// RequiresApproval: a paid booking waits for staff (PENDING_APPROVAL) for up to ApprovalWindow
	// (0: DefaultApprovalWindow); see Open.
	RequiresApproval bool
	ApprovalWindow   time.Duration
}

// DefaultPolicy is the policy of a resource that set none (docs/API.md's defaults).
func DefaultPolicy() Policy {
	return Policy{CancelRefund: 100, LateCancelRefund: 100, MaxReschedules: 2}
}

// PolicyInput changes a policy: fields left nil keep their value.
type PolicyInput struct {
	MinNoticeMinutes        *int
	MaxDaysAhead            *int
	CancelCutoffMinutes     *int
	CancelRefundPercent     *int
	LateCancelRefundPercent *int
	NoshowRefundPercent     *int
	RescheduleCutoffMinutes *int
	MaxReschedules          *int
	RequiresApproval        *bool
	ApprovalWindowMinutes   *int
}

// With answers p changed by in, each field checked against its bounds.
func (p Policy) With(in PolicyInput) (Policy, error) {
	for _, f := range []struct {
		field Field
		v     *int
		set   func(int)
	}{
		{FieldMinNotice, in.MinNoticeMinutes, func(v int) { p.MinNotice = time.Duration(v) * time.Minute }},
		{FieldMaxDaysAhead, in.MaxDaysAhead, func(v int) { p.MaxDaysAhead = v }},
		{FieldCancelCutoff, in.CancelCutoffMinutes, func(v int) { p.CancelCutoff = time.Duration(v) * time.Minute }},
		{FieldCancelRefund, in.CancelRefundPercent, func(v int) { p.CancelRefund = v }},
		{FieldLateRefund, in.LateCancelRefundPercent, func(v int) { p.LateCancelRefund = v }},
		{FieldNoshowRefund, in.NoshowRefundPercent, func(v int) { p.NoshowRefund = v }},
		{FieldRescheduleCut, in.RescheduleCutoffMinutes, func(v int) { p.RescheduleCutoff = time.Duration(v) * time.Minute }},
		{FieldMaxReschedules, in.MaxReschedules, func(v int) { p.MaxReschedules = v }},
		{FieldApprovalWindow, in.ApprovalWindowMinutes, func(v int) { p.ApprovalWindow = time.Duration(v) * time.Minute }},
	} {
		if f.v == nil {
			continue
		}
		if err := CheckRange(f.field, int64(*f.v)); err != nil {
			return Policy{}, err
		}
		f.set(*f.v)
	}
	if in.RequiresApproval != nil {
		p.RequiresApproval = *in.RequiresApproval
	}
	return p, nil
}

// TooSoon reports whether a window starting at start is inside the minimum notice at now.
func (p Policy) TooSoon(start, now time.Time) bool {
	return p.MinNotice > 0 && start.Before(now.Add(p.MinNotice))
}

// TooFar reports whether a venue-local day lies beyond the days the policy sells ahead.
func (p Policy) TooFar(day, now time.Time, loc *time.Location) bool {
	return p.MaxDaysAhead > 0 && !day.Before(LocalDay(now, loc).AddDate(0, 0, p.MaxDaysAhead))
}

// Refund reasons, as refund rows and events name them.
const (
	RefundUserCancel     = "user_cancel"
	RefundLateCancel     = "late_user_cancel"
	RefundAdminCancel    = "admin_cancel"
	RefundNoShow         = "no_show"
	RefundLatePayment    = "late_payment"    // paid for a hold whose units were gone
	RefundAmountMismatch = "amount_mismatch" // a verified payment of another amount than the hold's
	RefundDuplicate      = "duplicate_payment"
	RefundCapacity       = "capacity_refused"  // the capacity ledger refused the booking: its units were sold
	RefundDeclined       = "approval_declined" // staff, or the approval deadline, declined the booking
)

// Refund is what a change gives back of a booking's payment.
type Refund struct {
	Percent int
	Reason  string
}

// Amount is the refund of paid cents, rounded down to the cent.
func (r Refund) Amount(paid int64) int64 { return paid * int64(r.Percent) / 100 }

// cancelRefund decides a cancel by a at now of a booking starting at start: an admin cancels any time
// and refunds in full; a user cancels before start only, with the share the cut-off gives.
func (p Policy) cancelRefund(a Actor, start, now time.Time) (Refund, error) {
	switch {
	case a.Role == RoleAdmin:
		return Refund{Percent: 100, Reason: RefundAdminCancel}, nil
	case !now.Before(start):
		return Refund{}, ErrCancellationClosed
	}
	return p.shareAt(start, now), nil
}

// shareAt is what the policy gives back of a booking starting at start that ends at now: the
// cancel share before the cut-off, the late share until the start, the no-show share after it.
func (p Policy) shareAt(start, now time.Time) Refund {
	switch {
	case !now.Before(start):
		return Refund{Percent: p.NoshowRefund, Reason: RefundNoShow}
	case !now.Before(start.Add(-p.CancelCutoff)):
		return Refund{Percent: p.LateCancelRefund, Reason: RefundLateCancel}
	}
	return Refund{Percent: p.CancelRefund, Reason: RefundUserCancel}
}

// mayReschedule checks a move of a booking starting at start, moved moves times already, at now.
func (p Policy) mayReschedule(start time.Time, moves int, now time.Time) error {
	if !now.Before(start.Add(-p.RescheduleCutoff)) {
		return ErrRescheduleClosed
	}
	if moves >= p.MaxReschedules {
		return ErrRescheduleLimit.WithDetail("max_reschedules", p.MaxReschedules)
	}
	return nil
}

// NoshowPolicy freezes users who do not turn up (docs/API.md "No-shows": "a user over it gets 403
// account_frozen"); the zero value is off.
type NoshowPolicy struct {
	MaxNoshows int // no-shows within Within a user may have; one more freezes them (0: off)
	Within     time.Duration
	Freeze     time.Duration // how long, from the no-show that went over MaxNoshows
}

// NoshowPolicyInput sets the no-show policy; all three fields are required.
type NoshowPolicyInput struct{ MaxNoshows, WithinDays, FreezeDays int }

// ParseNoshowPolicy checks a no-show policy.
func ParseNoshowPolicy(in NoshowPolicyInput) (NoshowPolicy, error) {
	for _, f := range []struct {
		field Field
		v     int
	}{{FieldMaxNoshows, in.MaxNoshows}, {FieldWithinDays, in.WithinDays}, {FieldFreezeDays, in.FreezeDays}} {
		if err := CheckRange(f.field, int64(f.v)); err != nil {
			return NoshowPolicy{}, err
		}
	}
	day := 24 * time.Hour
	return NoshowPolicy{MaxNoshows: in.MaxNoshows, Within: time.Duration(in.WithinDays) * day,
		Freeze: time.Duration(in.FreezeDays) * day}, nil
}

// FrozenUntil decides whether a user whose no-shows were released at noshows (any order) is frozen
// at now: with more than MaxNoshows of them within Within before now (over the maximum, as the
// contract says: with max_noshows 3 the fourth no-show freezes, the third does not), the user is
// frozen for Freeze from the latest one. No-shows up to pardoned do not count: staff lifted the
// freeze they made (an unfreeze), and only new no-shows freeze the user again. It answers the end of
// the freeze, or the zero time when the user is free.
func (p NoshowPolicy) FrozenUntil(noshows []time.Time, pardoned, now time.Time) time.Time {
	if p.MaxNoshows <= 0 {
		return time.Time{}
	}
	n, latest := Counted(noshows, now.Add(-p.Within), pardoned, now)
	if n <= p.MaxNoshows {
		return time.Time{}
	}
	if until := latest.Add(p.Freeze); until.After(now) {
		return until
	}
	return time.Time{}
}

// Counted is how many of noshows count toward a freeze at now, looking back to since: those after
// since and after pardoned, up to now; and the latest of them.
func Counted(noshows []time.Time, since, pardoned, now time.Time) (n int, latest time.Time) {
	for _, at := range noshows {
		if at.After(since) && !at.After(now) && at.After(pardoned) {
			n++
			if at.After(latest) {
				latest = at
			}
		}
	}
	return n, latest
}
