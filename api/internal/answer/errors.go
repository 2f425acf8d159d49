package answer

import "net/http"

// Error is a failure decided by the API itself (bad input, authentication, routing). The engine's
// failures are *engine.Error and are mapped by kind (Classify).
type Error struct {
	Status  int
	Code    string
	Message string // English fallback, for logs and codes missing from the catalog
	Field   string // the offending JSON field or query parameter, if one is to blame
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// NewError is a failure answered with status and the stable code; message is the English fallback.
func NewError(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

// WithField returns a copy of e that names the offending field.
func (e *Error) WithField(field string) *Error {
	c := *e
	c.Field = field
	return &c
}

// BadRequest is a 400: the body or query cannot be read as the contract's types.
func BadRequest(code, message string) *Error {
	return NewError(http.StatusBadRequest, code, message)
}

// Unprocessable is a 422: well-formed input that breaks a rule.
func Unprocessable(code, message string) *Error {
	return NewError(http.StatusUnprocessableEntity, code, message)
}

// The failures that more than one part of the API decides. Those of one route alone (WeChat log-in,
// payment signatures) are declared beside it.
var (
	ErrNotFound           = NewError(http.StatusNotFound, "not_found", "no such route or object")
	ErrMethodNotAllowed   = NewError(http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed on this path")
	ErrUnauthorized       = NewError(http.StatusUnauthorized, "unauthorized", "a valid Bearer token is required")
	ErrForbidden          = NewError(http.StatusForbidden, "forbidden", "not allowed for this caller")
	ErrBodyTooLarge       = NewError(http.StatusRequestEntityTooLarge, "body_too_large", "the body exceeds 1 MiB")
	ErrInvalidIdempotency = BadRequest("invalid_idempotency_key", "Idempotency-Key must be 1 to 255 visible ASCII characters, sent once")
	ErrInternal           = NewError(http.StatusInternalServerError, "internal", "internal error")
	ErrBackendUnavailable = NewError(http.StatusServiceUnavailable, "backend_unavailable", "a backend is unavailable; try again")
)
