package engine

import "github.com/slotwheel/slotwheel/engine/booking"

// The domain's error type and sentinels, under the names callers of the engine use. They are
// defined once, in engine/booking.
type (
	// Error is a domain failure with a stable, machine-readable code.
	Error = booking.Error
	// Kind says what sort of failure an Error is.
	Kind = booking.Kind
	// NotDueError is returned by Release when called before the booking's release_at.
	NotDueError = booking.NotDueError
)

// The kinds of failure.
const (
	KindInvalid     = booking.KindInvalid
	KindNotFound    = booking.KindNotFound
	KindForbidden   = booking.KindForbidden
	KindConflict    = booking.KindConflict
	KindUnavailable = booking.KindUnavailable
	KindLimited     = booking.KindLimited
)

// Invalid builds a KindInvalid error.
var Invalid = booking.Invalid

// AsError returns the domain error inside err, if any.
var AsError = booking.AsError

// Sentinel errors.
var (
	ErrNotFound            = booking.ErrNotFound
	ErrForbidden           = booking.ErrForbidden
	ErrSlotFull            = booking.ErrSlotFull
	ErrSlotClosed          = booking.ErrSlotClosed
	ErrSlotPast            = booking.ErrSlotPast
	ErrOffGrid             = booking.ErrOffGrid
	ErrTooFar              = booking.ErrTooFar
	ErrTooSoon             = booking.ErrTooSoon
	ErrHoldExpired         = booking.ErrHoldExpired
	ErrHoldNotActive       = booking.ErrHoldNotActive
	ErrInvalidTransition   = booking.ErrInvalidTransition
	ErrTooEarly            = booking.ErrTooEarly
	ErrTooLate             = booking.ErrTooLate
	ErrRestoreWindowClosed = booking.ErrRestoreWindowClosed
	ErrCancellationClosed  = booking.ErrCancellationClosed
	ErrAmountMismatch      = booking.ErrAmountMismatch
	ErrPaymentIDConflict   = booking.ErrPaymentIDConflict
	ErrResourceInactive    = booking.ErrResourceInactive
	ErrScheduleConflict    = booking.ErrScheduleConflict
	ErrAlreadyWaiting      = booking.ErrAlreadyWaiting
	ErrConfirmInProgress   = booking.ErrConfirmInProgress
	ErrUnavailable         = booking.ErrBackendUnavailable
	ErrStorageUnavailable  = booking.ErrStorageUnavailable
	ErrTooManyHolds        = booking.ErrTooManyHolds
	ErrRateLimited         = booking.ErrRateLimited
	ErrAccountFrozen       = booking.ErrAccountFrozen
	ErrRescheduleClosed    = booking.ErrRescheduleClosed
	ErrRescheduleLimit     = booking.ErrRescheduleLimit
	ErrPriceDiffers        = booking.ErrPriceDiffers
	ErrWechatPayOff        = booking.ErrWechatPayOff
	ErrWechatLoginNeeded   = booking.ErrWechatLoginNeeded
	ErrNotificationRefuse  = booking.ErrNotificationRefused
)
