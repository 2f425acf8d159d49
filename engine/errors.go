package engine

import (
	"errors"
	"fmt"
	"time"
)

// Kind says what sort of failure an Error is, so that a boundary (HTTP, CLI, task queue) can map it
// without knowing every code.
type Kind int

// The kinds of failure.
const (
	KindInvalid     Kind = iota + 1 // the request itself is wrong; retrying it cannot help
	KindNotFound                    // no such thing, or not visible to this caller
	KindForbidden                   // it exists but this caller may not do that
	KindConflict                    // the request is fine but the state does not allow it now
	KindUnavailable                 // a backend is down; retrying later may help
)

// Error is a domain failure with a stable, machine-readable code. Sentinels below are compared with
// errors.Is; validation failures are built by Invalid and compared by code.
type Error struct {
	Kind    Kind
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Is makes a validation error built with Invalid match another with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Kind == e.Kind
}

// Invalid builds a KindInvalid error; code names the problem (`invalid_timezone`, `off_grid`).
func Invalid(code, format string, args ...any) error {
	return &Error{Kind: KindInvalid, Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError returns the domain error inside err, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Sentinel errors. Their codes are part of the REST contract.
var (
	ErrNotFound             = &Error{KindNotFound, "not_found", "no such object"}
	ErrForbidden            = &Error{KindForbidden, "forbidden", "not allowed for this caller"}
	ErrSlotFull             = &Error{KindConflict, "slot_full", "a unit of the requested window is taken"}
	ErrSlotClosed           = &Error{KindInvalid, "slot_closed", "the resource is closed for part of the requested window"}
	ErrSlotPast             = &Error{KindInvalid, "slot_past", "the requested slot has already ended"}
	ErrOffGrid              = &Error{KindInvalid, "off_grid", "start or end is not on the resource's slot grid"}
	ErrTooFar               = &Error{KindInvalid, "too_far", "the requested slot lies beyond the bookable horizon"}
	ErrHoldExpired          = &Error{KindConflict, "hold_expired", "the hold expired and its units are gone"}
	ErrHoldNotActive        = &Error{KindConflict, "hold_not_active", "the hold is no longer active"}
	ErrInvalidTransition    = &Error{KindConflict, "invalid_transition", "the booking's status does not allow that"}
	ErrTooEarly             = &Error{KindConflict, "too_early", "check-in is not open yet"}
	ErrTooLate              = &Error{KindConflict, "too_late", "the booking was already released"}
	ErrRestoreWindowClosed  = &Error{KindConflict, "restore_window_closed", "the restore window has closed"}
	ErrAmountMismatch       = &Error{KindInvalid, "amount_mismatch", "the amount paid differs from the hold's amount"}
	ErrResourceInactive     = &Error{KindConflict, "resource_inactive", "the resource is not bookable"}
	ErrScheduleConflict     = &Error{KindConflict, "schedule_conflict", "the new schedule would put more booked units in a slot than it has"}
	ErrUnavailable          = &Error{KindUnavailable, "backend_unavailable", "a backend is unavailable; try again"}
	ErrConfirmInProgress    = &Error{KindConflict, "confirm_in_progress", "the hold is being confirmed; retry shortly"}
	ErrIdempotencyKeyReused = &Error{KindInvalid, "idempotency_key_reused", "the Idempotency-Key was used with another request body"}
	ErrRequestInProgress    = &Error{KindConflict, "request_in_progress", "a request with this Idempotency-Key is still running"}
)

// NotDueError is returned by Release when called before the booking's release_at: asynq stores
// scheduled times in whole seconds and may start a task up to a second early.
type NotDueError struct{ Wait time.Duration }

func (e *NotDueError) Error() string { return fmt.Sprintf("release not due for %s", e.Wait) }
