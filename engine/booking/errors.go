package booking

import (
	"errors"
	"fmt"
	"maps"
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
	KindLimited                     // the caller is over a limit; retrying later may help
)

// Error is a domain failure with a stable, machine-readable code. Sentinels below are compared with
// errors.Is (by code and kind, so that a copy carrying a field or details still matches).
type Error struct {
	Kind    Kind
	Code    string
	Message string
	// Field names the request field to blame, when one is.
	Field string
	// Details carry what a client needs to act on the failure (the bookings a schedule change would
	// hit, when check-in opens, until when an account is frozen).
	Details map[string]any
}

func (e *Error) Error() string {
	if e.Field != "" {
		return e.Code + ": " + e.Field + ": " + e.Message
	}
	return e.Code + ": " + e.Message
}

// Is makes errors with the same code and kind match, whatever their field, message or details.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Kind == e.Kind
}

// WithField returns a copy of e that blames field.
func (e *Error) WithField(field string) *Error {
	c := *e
	c.Field = field
	return &c
}

// WithDetail returns a copy of e carrying one more detail.
func (e *Error) WithDetail(key string, value any) *Error {
	c := *e
	c.Details = maps.Clone(e.Details)
	if c.Details == nil {
		c.Details = map[string]any{}
	}
	c.Details[key] = value
	return &c
}

// DetailsIn is err with every time among its details in loc — the venue's zone, in which the API
// answers every time (a check-in's opens_at, a freeze's until) — and err itself when it is not an
// *Error or carries no time.
func DetailsIn(err error, loc *time.Location) error {
	e, ok := errors.AsType[*Error](err)
	if !ok || loc == nil {
		return err
	}
	out := e
	for k, v := range e.Details {
		if t, ok := v.(time.Time); ok {
			out = out.WithDetail(k, t.In(loc))
		}
	}
	if out == e {
		return err
	}
	return out
}

// Invalid builds a KindInvalid error; code names the problem (`invalid_timezone`, `off_grid`).
func Invalid(code, format string, args ...any) *Error {
	return &Error{Kind: KindInvalid, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Unknown turns ErrNotFound of an object a request names into the request's own KindInvalid error
// (a hold of an unknown resource is invalid, not a missing page); other errors pass unchanged.
func Unknown(err error, code, format string, args ...any) error {
	if errors.Is(err, ErrNotFound) {
		return Invalid(code, format, args...)
	}
	return err
}

// AsError returns the domain error inside err, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Sentinel errors. Their codes are part of the REST contract (docs/API.md, openapi.json's
// Error.code).
var (
	ErrNotFound            = &Error{Kind: KindNotFound, Code: "not_found", Message: "no such object"}
	ErrForbidden           = &Error{Kind: KindForbidden, Code: "forbidden", Message: "not allowed for this caller"}
	ErrSlotFull            = &Error{Kind: KindConflict, Code: "slot_full", Message: "a unit of the requested window is taken"}
	ErrSlotClosed          = &Error{Kind: KindInvalid, Code: "slot_closed", Message: "the resource is closed for part of the requested window"}
	ErrSlotPast            = &Error{Kind: KindInvalid, Code: "slot_past", Message: "the requested slot has already ended"}
	ErrOffGrid             = &Error{Kind: KindInvalid, Code: "off_grid", Message: "start or end is not on the resource's slot grid"}
	ErrTooFar              = &Error{Kind: KindInvalid, Code: "too_far", Message: "the requested slot lies beyond the bookable horizon"}
	ErrTooSoon             = &Error{Kind: KindInvalid, Code: "too_soon", Message: "the requested slot starts sooner than the resource's minimum notice"}
	ErrHoldExpired         = &Error{Kind: KindConflict, Code: "hold_expired", Message: "the hold expired and its units are gone"}
	ErrHoldNotActive       = &Error{Kind: KindConflict, Code: "hold_not_active", Message: "the hold is no longer active"}
	ErrInvalidTransition   = &Error{Kind: KindConflict, Code: "invalid_transition", Message: "the booking's status does not allow that"}
	ErrTooEarly            = &Error{Kind: KindConflict, Code: "too_early", Message: "check-in is not open yet"}
	ErrTooLate             = &Error{Kind: KindConflict, Code: "too_late", Message: "the booking was already released"}
	ErrRestoreWindowClosed = &Error{Kind: KindConflict, Code: "restore_window_closed", Message: "the restore window has closed"}
	ErrCancellationClosed  = &Error{Kind: KindConflict, Code: "cancellation_closed", Message: "the booking has started; it can no longer be cancelled by its owner"}
	ErrAmountMismatch      = &Error{Kind: KindInvalid, Code: "amount_mismatch", Message: "the amount paid differs from the hold's amount"}
	ErrPaymentIDConflict   = &Error{Kind: KindConflict, Code: "payment_id_conflict", Message: "the payment_id was already used for another hold"}
	ErrResourceInactive    = &Error{Kind: KindConflict, Code: "resource_inactive", Message: "the resource is not bookable"}
	ErrScheduleConflict    = &Error{Kind: KindConflict, Code: "schedule_conflict", Message: "the new schedule would close hours or remove units under confirmed bookings"}
	ErrCapacityConflict    = &Error{Kind: KindConflict, Code: "capacity_conflict", Message: "the new capacity is less than the units bookings already take", Field: "capacity"}
	ErrAlreadyWaiting      = &Error{Kind: KindConflict, Code: "already_waiting", Message: "you are already waiting for this window"}
	ErrConfirmInProgress   = &Error{Kind: KindConflict, Code: "confirm_in_progress", Message: "the hold is being confirmed; retry shortly"}
	ErrTooManyHolds        = &Error{Kind: KindLimited, Code: "too_many_holds", Message: "too many unpaid holds at this venue; pay for one or give one up first"}
	ErrRateLimited         = &Error{Kind: KindLimited, Code: "rate_limited", Message: "too many requests from this address; slow down"}
	ErrAccountFrozen       = &Error{Kind: KindForbidden, Code: "account_frozen", Message: "too many no-shows: new holds are refused until the freeze ends"}
	ErrRescheduleClosed    = &Error{Kind: KindConflict, Code: "reschedule_closed", Message: "the booking can no longer be moved: the reschedule cut-off has passed"}
	ErrRescheduleLimit     = &Error{Kind: KindConflict, Code: "reschedule_limit", Message: "the booking was moved as often as its resource allows"}
	ErrWechatPayOff        = &Error{Kind: KindNotFound, Code: "wechatpay_not_configured", Message: "WeChat Pay is not configured"}
	ErrWechatLoginNeeded   = &Error{Kind: KindForbidden, Code: "wechat_login_required", Message: "pay with WeChat after logging in through WeChat: the order's payer is your openid"}
	ErrNotificationRefused = &Error{Kind: KindInvalid, Code: "bad_notification", Message: "the notification could not be verified or decrypted"}
	ErrAwaitingApproval    = &Error{Kind: KindConflict, Code: "awaiting_approval", Message: "the booking is waiting for the venue's approval"}
	ErrNotPendingApproval  = &Error{Kind: KindConflict, Code: "not_pending_approval", Message: "the booking is not waiting for approval"}
	ErrApprovalLapsed      = &Error{Kind: KindConflict, Code: "approval_lapsed", Message: "the approval deadline has passed; the booking is being declined"}
	ErrReasonRequired      = &Error{Kind: KindInvalid, Code: "reason_required", Message: "say why: the reason is kept with the action", Field: "reason"}
	ErrPriceDiffers        = &Error{Kind: KindConflict, Code: "price_differs", Message: "the new window costs another amount than the booking was paid for"}
	// ErrBackendUnavailable is Redis (or the queue) being unreachable; ErrStorageUnavailable is the SQL
	// store. docs/API.md names them apart: holds keep working while only MySQL is away.
	ErrBackendUnavailable = &Error{Kind: KindUnavailable, Code: "backend_unavailable", Message: "a backend is unavailable; try again"}
	ErrStorageUnavailable = &Error{Kind: KindUnavailable, Code: "storage_unavailable", Message: "the database is unavailable; try again"}
)

// NotDueError says that something was asked before its time: asynq stores scheduled times in whole
// seconds and may start a task up to a second early.
type NotDueError struct{ Wait time.Duration }

func (e *NotDueError) Error() string { return fmt.Sprintf("not due for %s", e.Wait) }
