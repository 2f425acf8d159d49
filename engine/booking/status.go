// Package booking is slotwheel's domain core: every rule of a booking's life, written once and
// tested without any backend. It holds the closed set of booking and hold statuses with the one
// transition table, the booking value with its guarded transitions, the policy arithmetic (grace with
// peaks, release_at, the restore and check-in windows, the physical window, cut-offs and refund
// shares), the slot grid in venue-local time, availability judging and the limits of every input.
//
// It does no I/O and reads no clock: "now" is always an argument. It imports only the standard
// library; engine/ and its stores carry its decisions out (Lua, SQL, HTTP), they do not restate them.
package booking

import "slices"

// Status is a durable booking's state (docs/DESIGN.md "States"). HELD, EXPIRED and CANCELLED holds
// live only in Redis; see HoldStatus.
type Status string

// The booking statuses.
const (
	// PendingApproval: paid, with its units taken, waiting for the venue's staff to approve it (it
	// becomes CONFIRMED) or decline it; its release_at is the approval deadline, when it is declined
	// unless approved (see Open).
	PendingApproval  Status = "PENDING_APPROVAL"
	Declined         Status = "DECLINED" // by staff, or by the approval deadline; fully refunded
	Confirmed        Status = "CONFIRMED"
	Arrived          Status = "ARRIVED"
	InProgress       Status = "IN_PROGRESS"
	Completed        Status = "COMPLETED"
	Released         Status = "RELEASED"
	CancelledByUser  Status = "CANCELLED_BY_USER"
	CancelledByAdmin Status = "CANCELLED_BY_ADMIN"
)

// Statuses lists every booking status.
func Statuses() []Status {
	return []Status{PendingApproval, Confirmed, Arrived, InProgress, Completed, Released, CancelledByUser, CancelledByAdmin, Declined}
}

// ParseStatus reads a status as the API and the store write it.
func ParseStatus(s string) (Status, bool) {
	st := Status(s)
	return st, slices.Contains(Statuses(), st)
}

// transitions is the one table of allowed booking status changes. HELD → CONFIRMED happens when the
// booking is created; everything after goes through a guarded method of Booking.
var transitions = map[Status][]Status{
	PendingApproval: {Confirmed, Declined, CancelledByUser, CancelledByAdmin},
	Confirmed:       {Arrived, Released, CancelledByUser, CancelledByAdmin},
	Arrived:         {InProgress, Completed, CancelledByAdmin},
	InProgress:      {Completed},
	Released:        {Confirmed, Arrived}, // restore and late check-in, within the restore window
}

// CanMove reports whether the table allows from → to.
func CanMove(from, to Status) bool { return slices.Contains(transitions[from], to) }

// Transition is one status change a booking can make.
type Transition struct{ From, To Status }

// Created is the change that creates a booking: a paid hold (HELD) becomes CONFIRMED, or
// PENDING_APPROVAL when its resource requires approval (CreatedPending). Neither is in the table
// because no booking exists yet to move; they are announced and counted like the others.
var (
	Created        = Transition{From: Status(HoldHeld), To: Confirmed}
	CreatedPending = Transition{From: Status(HoldHeld), To: PendingApproval}
)

// Creations lists the changes that create a booking, beside Transitions for whatever counts them.
func Creations() []Transition { return []Transition{Created, CreatedPending} }

// Transitions lists every change the table allows, in the order of Statuses, so that whatever
// counts or shows transitions (metrics, dashboards) can name each one before it first happens.
func Transitions() []Transition {
	var out []Transition
	for _, from := range Statuses() {
		for _, to := range Statuses() {
			if CanMove(from, to) {
				out = append(out, Transition{from, to})
			}
		}
	}
	return out
}

// Occupies reports whether a booking in this status keeps its units taken.
func (s Status) Occupies() bool {
	return s == PendingApproval || s == Confirmed || s == Arrived || s == InProgress
}

// CountsAsNoShow reports whether a booking in this status is one no-show of its owner. A user's
// no-show count is the number of their bookings in such a status: a release counts one, and a
// restore or a late check-in (which leave RELEASED) take it back, so nothing can count twice.
func (s Status) CountsAsNoShow() bool { return s == Released }

// OccupyingStatuses lists the statuses whose units stay taken, for store queries.
func OccupyingStatuses() []Status { return []Status{PendingApproval, Confirmed, Arrived, InProgress} }

// NoShowStatuses lists the statuses that count as a no-show, for store queries.
func NoShowStatuses() []Status { return []Status{Released} }

// HoldStatus is an unpaid hold's state; holds live in Redis only.
type HoldStatus string

// The hold statuses. A HELD hold whose deadline has passed is EXPIRED whether or not the wheel has
// written so yet (Hold.Effective).
const (
	HoldHeld       HoldStatus = "HELD"
	HoldConfirming HoldStatus = "CONFIRMING"
	HoldConfirmed  HoldStatus = "CONFIRMED"
	HoldExpired    HoldStatus = "EXPIRED"
	HoldCancelled  HoldStatus = "CANCELLED"
)

// HoldStatuses lists every hold status.
func HoldStatuses() []HoldStatus {
	return []HoldStatus{HoldHeld, HoldConfirming, HoldConfirmed, HoldExpired, HoldCancelled}
}
