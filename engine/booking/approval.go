package booking

import (
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultApprovalWindow is how long staff have to approve a booking of a resource that requires
// approval and set no window of its own: a day, so that a booking made in the evening can be
// decided the next morning; it never runs past the slot's start (see ApprovalDeadline).
const DefaultApprovalWindow = 24 * time.Hour

// Open decides how a paid hold becomes a booking at now under its resource's policy p: CONFIRMED,
// released at start + grace if nobody checks in; or, when p requires approval, PENDING_APPROVAL
// with its units taken until the approval deadline, which takes release_at's place (the same
// durable timer declines it then unless staff decided first).
func Open(p Policy, start, end, now time.Time, grace time.Duration) (Status, time.Time) {
	if p.RequiresApproval {
		return PendingApproval, ApprovalDeadline(p.EffectiveApprovalWindow(), start, end, now)
	}
	return Confirmed, ReleaseAt(start, now, grace)
}

// ApprovalDeadline is when a booking made at now waits for approval until: window after now, but
// never past the slot's start, so that a guest knows before they set out; a booking of a slot
// already in progress may wait until its end at most.
func ApprovalDeadline(window time.Duration, start, end, now time.Time) time.Time {
	limit := start
	if !now.Before(start) {
		limit = end
	}
	if at := now.Add(window); at.Before(limit) {
		return at
	}
	return limit
}

// EffectiveApprovalWindow is the approval window in force: the policy's own, or the default.
func (p Policy) EffectiveApprovalWindow() time.Duration {
	if p.ApprovalWindow > 0 {
		return p.ApprovalWindow
	}
	return DefaultApprovalWindow
}

// ApprovalDeadline answers when a PENDING_APPROVAL booking is declined unless approved (its
// release_at); ok is false in any other status.
func (b *Booking) ApprovalDeadline() (time.Time, bool) {
	return b.ReleaseAt, b.Status == PendingApproval
}

// maxReasonLen bounds the reason staff give an action: the history keeps 200 characters, the
// action's own words ("restored on appeal: ") included.
const maxReasonLen = 160

// Reason checks the reason a member of staff gives for an action on a booking (decline, cancel,
// restore on appeal, unfreeze): it goes into the history, so it must say something, and fit.
func Reason(s string, required bool) (string, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "" && required:
		return "", ErrReasonRequired
	case utf8.RuneCountInString(s) > maxReasonLen || !utf8.ValidString(s):
		return "", Invalid("invalid_reason", "reason must be valid text of at most 160 characters").WithField("reason")
	}
	return s, nil
}

// staffReason is how the history records an action's reason: the action, then what staff wrote.
func staffReason(action, reason string) string {
	if reason == "" {
		return action
	}
	return action + ": " + reason
}

// Approve decides staff's approval at now: a PENDING_APPROVAL booking becomes CONFIRMED and goes on
// as a paid booking does, released at start + grace (now + grace when approved after its start) if
// nobody checks in. The deadline's timer is replaced by the release's.
func (b *Booking) Approve(now time.Time, grace time.Duration, actor, reason string) (Change, error) {
	if b.Status != PendingApproval {
		return Change{}, ErrNotPendingApproval
	}
	if !now.Before(b.ReleaseAt) {
		return Change{}, ErrApprovalLapsed // the deadline has passed: its timer declines it
	}
	c, err := b.move(Confirmed, now, actor, staffReason("approved", reason))
	if err != nil {
		return c, err
	}
	b.ReleaseAt = ReleaseAt(b.Start, now, grace)
	c.DropTimers, c.NewReleaseAt = true, true
	return c, nil
}

// Decline decides staff's refusal at now: the booking's units come back and its payment is refunded
// in full. Declining a declined booking again is the zero Change.
func (b *Booking) Decline(now time.Time, actor, reason string) (Change, error) {
	if b.Status == Declined {
		return Change{}, nil
	}
	if b.Status != PendingApproval {
		return Change{}, ErrNotPendingApproval
	}
	return b.decline(now, actor, staffReason("declined", reason))
}

// lapse decides the approval deadline at now: never early, and only for a booking still waiting.
func (b *Booking) lapse(now time.Time) (Change, error) {
	if now.Before(b.ReleaseAt) {
		return Change{}, &NotDueError{Wait: b.ReleaseAt.Sub(now)}
	}
	return b.decline(now, ActorSystem, "approval deadline passed")
}

func (b *Booking) decline(now time.Time, actor, reason string) (Change, error) {
	c, err := b.move(Declined, now, actor, reason)
	if err != nil {
		return c, err
	}
	at := now
	b.CancelledAt = &at
	c.DropTimers = true
	c.Refund = &Refund{Percent: 100, Reason: RefundDeclined}
	return c, nil
}

// AdminCancel decides a cancellation by the venue (staff of it, or an admin) at now, with a reason:
// CANCELLED_BY_ADMIN at any time, refunded in full, or — when full is false — by the resource's
// policy as if the guest had cancelled then (after the start: the no-show share).
func (b *Booking) AdminCancel(a Actor, now time.Time, p Policy, full bool, reason string) (Change, error) {
	if b.Status == CancelledByAdmin {
		return Change{}, nil
	}
	if !CanMove(b.Status, CancelledByAdmin) {
		return Change{}, ErrInvalidTransition
	}
	refund := Refund{Percent: 100, Reason: RefundAdminCancel}
	if !full {
		refund = p.shareAt(b.Start, now)
	}
	c, err := b.move(CancelledByAdmin, now, a.Name(), staffReason("cancelled", reason))
	if err != nil {
		return c, err
	}
	at := now
	b.CancelledAt = &at
	c.DropTimers = true
	if refund.Percent > 0 {
		c.Refund = &refund
	}
	return c, nil
}

// Appeal decides staff's restore of a released booking at now, on the guest's appeal: like the
// owner's restore (Restore), but past the owner's own window, up to the end of the slot.
func (b *Booking) Appeal(now time.Time, grace time.Duration, actor, reason string) (Change, error) {
	if b.Status != Released {
		return Change{}, ErrInvalidTransition
	}
	if !now.Before(b.End) {
		return Change{}, ErrRestoreWindowClosed
	}
	c, err := b.move(Confirmed, now, actor, staffReason("restored on appeal", reason))
	if err != nil {
		return c, err
	}
	b.ReleaseAt, b.ReleasedAt = now.Add(grace), nil
	c.NewReleaseAt = true
	return c, nil
}

// How a cancel by the venue refunds the guest.
const (
	RefundFull   = "full"   // everything paid, whatever the cut-off
	RefundPolicy = "policy" // what the resource's cancellation rules give a guest cancelling now
)

// ParseRefund reads how a cancel by the venue refunds: in full unless "policy" is asked for — the
// venue cancelling is the venue's doing, so the guest is made whole unless staff say otherwise.
func ParseRefund(s string) (full bool, err error) {
	switch s {
	case "", RefundFull:
		return true, nil
	case RefundPolicy:
		return false, nil
	}
	return false, Invalid("invalid_refund", "refund must be full or policy").WithField("refund")
}
