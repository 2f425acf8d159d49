package booking

import "time"

// Booking is a durable, paid booking: the value every transition is decided on. Times are instants
// (the engine shows them in the venue's zone).
type Booking struct {
	ID         uint64
	HoldID     string
	UserID     string
	VenueID    uint64
	ResourceID uint64
	ServiceID  uint64
	Quantity   int
	Status     Status
	// Version counts the booking's changes; the store writes a change only onto the version it was
	// decided on, so two racing changes cannot both apply.
	Version int
	// Start and End are the customer's window; OccupyStart and OccupyEnd the physical window whose
	// units the booking takes (buffers included).
	Start, End             time.Time
	OccupyStart, OccupyEnd time.Time
	ReleaseAt              time.Time
	ConfirmedAt            time.Time
	CheckedInAt            *time.Time
	ReleasedAt             *time.Time
	CancelledAt            *time.Time
	CheckinCode            string
	PaymentID              string
	AmountCents            int64
	// ReleaseHeldAt is when the venue's release mode held the no-show release back: the booking
	// stays CONFIRMED, is not released later, and may still be checked in until its end.
	ReleaseHeldAt *time.Time
	// Reschedules counts the moves of the booking to another window.
	Reschedules int
	// Roles are the resources of a multi-resource service's booking, one per role; ResourceID is the
	// first. Empty for a booking of one resource.
	Roles []RoleResource
}

// ReleaseMode is how a venue treats its no-shows at release_at.
type ReleaseMode string

// The release modes.
const (
	ReleaseOn     ReleaseMode = "on"      // release, give the units back
	ReleaseOff    ReleaseMode = "off"     // decide nothing: the booking keeps its units
	ReleaseDryRun ReleaseMode = "dry_run" // decide, announce (booking.release_skipped), keep the units
)

// ParseReleaseMode reads a release mode.
func ParseReleaseMode(s string) (ReleaseMode, error) {
	switch m := ReleaseMode(s); m {
	case ReleaseOn, ReleaseOff, ReleaseDryRun:
		return m, nil
	}
	return "", Invalid("invalid_release_mode", "mode must be on, off or dry_run").WithField("mode")
}

// Rules are the deployment-wide settings the transitions depend on.
type Rules struct {
	// RestoreWindow is how long after a release the owner may restore, and staff may still check in.
	RestoreWindow time.Duration
	// CheckinOpens is how long before start check-in opens.
	CheckinOpens time.Duration
}

// Change is one decided transition: what the store writes (status, the changed fields already set
// on the booking, a history row and an event) and what the engine carries out around the commit.
// The zero Change means "nothing to do" (a repeated cancel, a second scan of a check-in code).
type Change struct {
	From, To Status
	At       time.Time
	Actor    string // as the history records it: "system", "staff:desk-1", ...
	Reason   string

	// DropTimers: after the commit, the booking's release task is no longer needed.
	DropTimers bool
	// NewReleaseAt: after the commit, the booking has a new release_at that needs a release task.
	NewReleaseAt bool
	// HeldBy is the release mode that held a due release back (To == From == CONFIRMED).
	HeldBy ReleaseMode
	// Refund, when set, is what the change gives back of the booking's payment (a cancel, a no-show).
	Refund *Refund
	// Moved: the booking's window changed (a reschedule); its old units are given back by the same
	// step that took the new ones.
	Moved bool
}

// None reports whether c is the zero change.
func (c Change) None() bool { return c.To == "" }

// Units is what a change does to the units its booking takes: the one rule that the capacity
// ledger (MySQL, in the change's own transaction) and the counters (Redis, around the commit) both
// carry out. A change into an occupying status takes the units, one out of an occupying status
// gives them back, and a move (a reschedule) gives back the old window's and takes the new one's.
// The units given back are always given back before any are taken, so that a move onto slots it
// shares with its old window needs no room it already has.
type Units struct{ Give, Take bool }

// Units says what c does to its booking's units (see the type). The change that creates a booking
// (Created: HELD → CONFIRMED) takes them, since a hold is not a booking status that occupies.
func (c Change) Units() Units {
	if c.None() {
		return Units{}
	}
	if c.Moved {
		return Units{Give: true, Take: true}
	}
	from, to := c.From.Occupies(), c.To.Occupies()
	return Units{Give: from && !to, Take: !from && to}
}

// TakesUnits: before the commit, the booking's units must be taken again in the hot state; if they
// are not free the change cannot happen (restore, a check-in after the release). A move takes its
// new window by a step of its own (a reservation), so it is not one of these.
func (c Change) TakesUnits() bool { return c.Units().Take && !c.Moved }

// FreesUnits: after the commit, the booking's units come back to the hot state (a move's old
// window is given back by the step that ends the move).
func (c Change) FreesUnits() bool { return c.Units().Give && !c.Moved }

// Event is the event type docs/API.md gives the change, or "" for a change that is not announced
// (ARRIVED → IN_PROGRESS happens to every checked-in booking at its start and tells nobody anything).
func (c Change) Event() string {
	if c.HeldBy != "" {
		if c.HeldBy == ReleaseDryRun {
			return EventReleaseSkipped
		}
		return "" // off: nothing is decided, nothing is said
	}
	if c.Moved {
		return EventRescheduled
	}
	switch c.To {
	case PendingApproval:
		return EventPendingApproval
	case Declined:
		return EventDeclined
	case Arrived:
		return EventCheckedIn
	case Released:
		return EventReleased
	case Confirmed:
		if c.From == Released {
			return EventRestored
		}
		return EventConfirmed // created paid, or approved (previous_status PENDING_APPROVAL)
	case CancelledByUser, CancelledByAdmin:
		return EventCancelled
	case Completed:
		return EventCompleted
	}
	return ""
}

// The event types of docs/API.md "Events and webhooks".
const (
	EventConfirmed = "booking.confirmed"
	// EventPendingApproval: a paid booking waits for staff; EventDeclined: staff or the approval
	// deadline declined it (its payment is refunded in full).
	EventPendingApproval = "booking.pending_approval"
	EventDeclined        = "booking.declined"
	EventReminder        = "booking.reminder"
	EventCheckedIn       = "booking.checked_in"
	EventReleased        = "booking.released"
	EventRestored        = "booking.restored"
	EventCancelled       = "booking.cancelled"
	EventRescheduled     = "booking.rescheduled"
	EventCompleted       = "booking.completed"
	EventReleaseSkipped  = "booking.release_skipped"
	EventHoldExpired     = "hold.expired"
	// EventHoldRefused: a hold ended because its units were sold to bookings (the capacity ledger
	// refused its confirm, or a repair after Redis lost writes found its slot over capacity); a
	// payment for it is refunded.
	EventHoldRefused  = "hold.refused"
	EventPromoted     = "waitlist.promoted"
	EventLapsed       = "waitlist.lapsed"
	EventRefundReq    = "refund.requested"
	EventRefundOK     = "refund.succeeded"
	EventRefundFailed = "refund.failed"
)

// EventTypes lists every event type, for validating webhook subscriptions.
func EventTypes() []string {
	return []string{EventConfirmed, EventPendingApproval, EventDeclined, EventReminder, EventCheckedIn, EventReleased, EventRestored, EventCancelled,
		EventRescheduled, EventCompleted, EventReleaseSkipped, EventHoldExpired, EventHoldRefused, EventPromoted, EventLapsed,
		EventRefundReq, EventRefundOK, EventRefundFailed}
}

// move applies from → to to b, guarded by the transition table.
func (b *Booking) move(to Status, at time.Time, actor, reason string) (Change, error) {
	if !CanMove(b.Status, to) {
		return Change{}, ErrInvalidTransition
	}
	c := Change{From: b.Status, To: to, At: at, Actor: actor, Reason: reason}
	b.Status = to
	return c, nil
}

// CheckinOpensAt is the first instant staff may check the booking in.
func (b *Booking) CheckinOpensAt(r Rules) time.Time { return b.Start.Add(-r.CheckinOpens) }

// RestoreWindow is when the owner may restore the booking (and staff may still check it in) after its
// release: from the release, inclusive, for Rules.RestoreWindow, but never past the end of the slot,
// exclusive. A booking without a recorded release (still CONFIRMED past its release_at, or a row
// from before released_at was kept) is measured from its release_at.
func (b *Booking) RestoreWindow(r Rules) (from, to time.Time) {
	from = b.ReleaseAt
	if b.ReleasedAt != nil {
		from = *b.ReleasedAt
	}
	to = from.Add(r.RestoreWindow)
	if b.End.Before(to) {
		to = b.End
	}
	return from, to
}

// InWindow reports whether t lies in [from, to): every window of the booking life is inclusive at its
// start and exclusive at its end.
func InWindow(t, from, to time.Time) bool { return !t.Before(from) && t.Before(to) }

// CheckIn decides a staff check-in received at received. A check-in received before release_at always
// wins over the release: if the release committed first, the booking comes back (its units must be
// taken again). After release_at it is accepted within the restore window only.
func (b *Booking) CheckIn(received time.Time, actor string, r Rules) (Change, error) {
	switch b.Status {
	case Arrived, InProgress:
		return Change{}, nil // scanned twice
	case PendingApproval:
		return Change{}, ErrAwaitingApproval
	case Confirmed:
		if opens := b.CheckinOpensAt(r); received.Before(opens) {
			return Change{}, ErrTooEarly.WithDetail("opens_at", opens)
		}
		if received.Before(b.ReleaseAt) || (b.ReleaseHeldAt != nil && received.Before(b.End)) {
			break // before release_at, or the venue held the release back: until the end
		}
		if from, to := b.RestoreWindow(r); !InWindow(received, from, to) {
			return Change{}, ErrTooLate
		}
	case Released:
		if from, to := b.RestoreWindow(r); !received.Before(b.ReleaseAt) && !InWindow(received, from, to) {
			return Change{}, ErrTooLate
		}
	default:
		return Change{}, ErrInvalidTransition
	}
	reason := "checked in"
	if b.Status == Released {
		reason = "checked in after release"
	}
	c, err := b.move(Arrived, received, actor, reason)
	if err != nil {
		return c, err
	}
	at := received
	b.CheckedInAt = &at
	c.DropTimers = true
	return c, nil
}

// Release decides the no-show release at now, refunding what p gives a no-show. It is never early:
// before release_at it answers a *NotDueError with the time left. A booking that is no longer
// CONFIRMED is not released (zero Change); callers tell "already released" from b.Status.
func (b *Booking) Release(now time.Time, p Policy) (Change, error) {
	if b.Status != Confirmed || b.ReleaseHeldAt != nil {
		return Change{}, nil
	}
	if now.Before(b.ReleaseAt) {
		return Change{}, &NotDueError{Wait: b.ReleaseAt.Sub(now)}
	}
	c, err := b.move(Released, now, ActorSystem, "no-show")
	if err != nil {
		return c, err
	}
	at := now
	b.ReleasedAt = &at
	if p.NoshowRefund > 0 {
		c.Refund = &Refund{Percent: p.NoshowRefund, Reason: RefundNoShow}
	}
	return c, nil
}

// Decide is the release at now under a venue's mode: on releases (see Release); off and dry_run
// hold the release back, once — the booking stays CONFIRMED with its units and is not released
// later. It is never early.
func (b *Booking) Decide(now time.Time, mode ReleaseMode, p Policy) (Change, error) {
	if b.Status == PendingApproval {
		return b.lapse(now)
	}
	if mode == ReleaseOn || mode == "" {
		return b.Release(now, p)
	}
	if b.Status != Confirmed || b.ReleaseHeldAt != nil {
		return Change{}, nil
	}
	if now.Before(b.ReleaseAt) {
		return Change{}, &NotDueError{Wait: b.ReleaseAt.Sub(now)}
	}
	at := now
	b.ReleaseHeldAt = &at
	return Change{From: Confirmed, To: Confirmed, At: now, Actor: ActorSystem, Reason: "release held: " + string(mode), HeldBy: mode}, nil
}

// Restore decides the owner's restore at now, within the restore window: the booking is CONFIRMED
// again with release_at = now + grace, if its units can be taken again.
func (b *Booking) Restore(now time.Time, grace time.Duration, actor string, r Rules) (Change, error) {
	if b.Status != Released {
		return Change{}, ErrInvalidTransition
	}
	if from, to := b.RestoreWindow(r); !InWindow(now, from, to) {
		return Change{}, ErrRestoreWindowClosed
	}
	c, err := b.move(Confirmed, now, actor, "restored")
	if err != nil {
		return c, err
	}
	b.ReleaseAt, b.ReleasedAt = now.Add(grace), nil
	c.NewReleaseAt = true
	return c, nil
}

// Cancel decides a cancellation by actor at now under p: CANCELLED_BY_USER for the owner — before
// start only, refunded by the cut-off — or CANCELLED_BY_ADMIN, any time and in full. Cancelling
// again with the same outcome is the zero Change.
func (b *Booking) Cancel(a Actor, now time.Time, p Policy) (Change, error) {
	to := CancelledByUser
	if a.Role == RoleAdmin {
		to = CancelledByAdmin
	}
	if b.Status == to {
		return Change{}, nil
	}
	if !CanMove(b.Status, to) {
		return Change{}, ErrInvalidTransition
	}
	refund, err := p.cancelRefund(a, b.Start, now)
	if b.Status == PendingApproval && a.Role != RoleAdmin {
		// Never accepted by the venue: the guest who withdraws gets everything back.
		refund, err = Refund{Percent: 100, Reason: RefundUserCancel}, nil
	}
	if err != nil {
		return Change{}, err
	}
	c, err := b.move(to, now, a.Name(), "cancelled")
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

// Reschedule decides a move of the booking to a new window (already placed on the grid and checked
// against the sale rules by the caller) at now, under p: a CONFIRMED booking, before the reschedule
// cut-off, fewer times than p allows. The booking keeps its id, status and check-in code; its
// release_at follows the new window (start + grace, or now + grace for a window already started).
func (b *Booking) Reschedule(to Placement, resourceID uint64, grace time.Duration, actor string, now time.Time, p Policy) (Change, error) {
	if b.Status == Confirmed && b.ResourceID == resourceID && b.Start.Equal(to.Start) && b.End.Equal(to.End) {
		return Change{}, nil // already there: a repeated request (a retry after a lost answer) moves nothing
	}
	if b.Status != Confirmed {
		return Change{}, ErrInvalidTransition
	}
	if err := p.mayReschedule(b.Start, b.Reschedules, now); err != nil {
		return Change{}, err
	}
	if to.AmountCents != b.AmountCents {
		return Change{}, ErrPriceDiffers
	}
	c := Change{From: Confirmed, To: Confirmed, At: now, Actor: actor, Reason: "rescheduled", Moved: true, NewReleaseAt: true}
	b.ResourceID = resourceID
	b.Start, b.End, b.OccupyStart, b.OccupyEnd = to.Start, to.End, to.OccupyStart, to.OccupyEnd
	b.ReleaseAt = ReleaseAt(to.Start, now, grace)
	b.Reschedules++
	return c, nil
}

// Progress moves a checked-in booking along with the clock: ARRIVED becomes IN_PROGRESS at its
// start, and COMPLETED — giving its units back — once its physical window (clean-up included) is
// over.
func (b *Booking) Progress(now time.Time) (Change, error) {
	switch {
	case (b.Status == Arrived || b.Status == InProgress) && !now.Before(b.OccupyEnd):
		return b.move(Completed, now, ActorSystem, "ended")
	case b.Status == Arrived && !now.Before(b.Start):
		return b.move(InProgress, now, ActorSystem, "started")
	}
	return Change{}, nil
}

// ReleaseAt is when a booking confirmed at confirmedAt is released if nobody checks in: its start
// plus grace, but a slot bought after it started still gets its grace.
func ReleaseAt(start, confirmedAt time.Time, grace time.Duration) time.Time {
	if confirmedAt.After(start) {
		return confirmedAt.Add(grace)
	}
	return start.Add(grace)
}

// PhysicalWindow is the window whose units a booking takes: the customer's window widened by the
// service's preparation and clean-up buffers.
func PhysicalWindow(start, end time.Time, prep, cleanup time.Duration) (time.Time, time.Time) {
	return start.Add(-prep), end.Add(cleanup)
}

// ReminderAt is when the owner of a CONFIRMED booking is reminded: lead before its release_at. A
// booking made (or restored) after that moment gets no reminder.
func ReminderAt(releaseAt time.Time, lead time.Duration, now time.Time) (time.Time, bool) {
	at := releaseAt.Add(-lead)
	return at, lead > 0 && at.After(now)
}
