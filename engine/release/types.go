package release

import (
	"context"
	"time"
)

// Ref names one scheduled release: a booking and the release_at it was scheduled for. A restored
// booking gets a new release_at and so a new ref; tasks of the old one do nothing.
type Ref struct {
	BookingID uint64
	ReleaseAt time.Time
	// Retried marks a delivery of the task after one that failed: Release then reads the booking
	// whatever the release loop says (not part of the task's identity).
	Retried bool
}

// Scheduler puts release tasks into the durable queue. jobs/ implements it; the engine calls it
// when a booking's release_at comes within the horizon and when a booking no longer needs one.
// ScheduleRelease answers whether it added the task: false when the queue had it already (a task's
// id is derived from its ref), which is success too, so that reconciliation counts only what it
// repaired.
type Scheduler interface {
	ScheduleRelease(ctx context.Context, ref Ref) (added bool, err error)
	CancelRelease(ctx context.Context, ref Ref) error
}

// Outcome says what Release did.
type Outcome string

// Release outcomes.
const (
	Released        Outcome = "released"         // CONFIRMED → RELEASED now
	AlreadyReleased Outcome = "already_released" // a duplicate delivery
	NotApplicable   Outcome = "not_applicable"   // checked in, cancelled, restored or rescheduled
	Settled         Outcome = "settled"          // the release loop had decided it: nothing read
)
