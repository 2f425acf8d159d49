package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/idem"
	"github.com/slotwheel/slotwheel/engine/wire"
)

// apiError is a failure decided by this package (bad input, authentication, routing). The engine's
// failures are *engine.Error and are mapped by kind.
type apiError struct {
	Status  int
	Code    string
	Message string // English fallback, for logs and codes missing from the catalog
	Field   string // the offending JSON field or query parameter, if one is to blame
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func newError(status int, code, message string) *apiError {
	return &apiError{Status: status, Code: code, Message: message}
}

// withField returns a copy of e that names the offending field.
func (e *apiError) withField(field string) *apiError {
	c := *e
	c.Field = field
	return &c
}

// badRequest is a 400: the body or query cannot be read as the contract's types.
func badRequest(code, message string) *apiError {
	return newError(http.StatusBadRequest, code, message)
}

// unprocessable is a 422: well-formed input that breaks a rule.
func unprocessable(code, message string) *apiError {
	return newError(http.StatusUnprocessableEntity, code, message)
}

// The failures this package decides. A failed WeChat exchange is 401 either way (docs/API.md):
// wechat_login_failed when WeChat refused the code, wechat_unavailable when it could not be reached or
// answered an HTTP error or something that is not JSON.
var (
	errNotFound            = newError(http.StatusNotFound, "not_found", "no such route or object")
	errMethodNotAllowed    = newError(http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed on this path")
	errUnauthorized        = newError(http.StatusUnauthorized, "unauthorized", "a valid Bearer token is required")
	errForbidden           = newError(http.StatusForbidden, "forbidden", "not allowed for this caller")
	errBodyTooLarge        = newError(http.StatusRequestEntityTooLarge, "body_too_large", "the body exceeds 1 MiB")
	errWechatNotConfigured = newError(http.StatusNotImplemented, "wechat_not_configured", "WeChat log-in is not configured")
	errWechatLoginFailed   = newError(http.StatusUnauthorized, "wechat_login_failed", "WeChat rejected the log-in code")
	errWechatUnavailable   = newError(http.StatusUnauthorized, "wechat_unavailable", "WeChat could not be reached")
	errBadSignature        = newError(http.StatusUnauthorized, "bad_signature", "the payment notification's signature is wrong")
	errStaleSignature      = newError(http.StatusUnauthorized, "stale_signature", "the payment notification's timestamp is over 5 minutes off")
	errInvalidHoldID       = unprocessable("invalid_hold_id", "hold_id is not a hold id").withField("hold_id")
	errInvalidIdempotency  = badRequest("invalid_idempotency_key", "Idempotency-Key must be 1 to 255 visible ASCII characters, sent once")
	errInternal            = newError(http.StatusInternalServerError, "internal", "internal error")
	errBackendUnavailable  = newError(http.StatusServiceUnavailable, "backend_unavailable", "a backend is unavailable; try again")
)

// errorBody is the body of every non-2xx answer.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	RequestID string         `json:"request_id"`
	Field     string         `json:"field,omitempty"`
	Details   map[string]any `json:"details,omitempty"`
}

// statusOfKind maps the engine's kinds of failure to HTTP.
var statusOfKind = map[booking.Kind]int{
	booking.KindInvalid:     http.StatusUnprocessableEntity,
	booking.KindNotFound:    http.StatusNotFound,
	booking.KindForbidden:   http.StatusForbidden,
	booking.KindConflict:    http.StatusConflict,
	booking.KindUnavailable: http.StatusServiceUnavailable,
	booking.KindLimited:     http.StatusTooManyRequests,
}

// classify is the one error mapper: status, stable code, English fallback message, blamed field and
// details of err. Anything it does not know is a 500 whose cause stays in the log.
func classify(err error) (status int, code, fallback, field string, details map[string]any) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status, ae.Code, ae.Message, ae.Field, nil
	}
	if ee, ok := booking.AsError(err); ok {
		if st, ok := statusOfKind[ee.Kind]; ok {
			return st, ee.Code, ee.Message, ee.Field, wireDetails(ee.Details)
		}
	}
	return errInternal.Status, errInternal.Code, errInternal.Message, "", nil
}

// wireDetails writes error details as the API shows values (times RFC 3339).
func wireDetails(d map[string]any) map[string]any {
	if len(d) == 0 {
		return nil
	}
	out := make(map[string]any, len(d))
	for k, v := range d {
		if t, ok := v.(time.Time); ok {
			v = wire.Time(t)
		}
		out[k] = v
	}
	return out
}

// retryLater names the codes whose answer tells the client to come back: the same request may
// succeed in a moment.
var retryLater = map[string]bool{
	idem.ErrInProgress.Code: true, booking.ErrConfirmInProgress.Code: true,
}

// fail answers c with err mapped to the error body, logs server-side failures with their cause, and
// stops the handler chain.
func (s *server) fail(c *gin.Context, err error) {
	a, code := s.errorAnswer(c, err)
	send(c, a, code)
	c.Abort()
}

// errorAnswer is the answer to c that err maps to (status and error body), and its code; a
// server-side failure is logged with its cause.
func (s *server) errorAnswer(c *gin.Context, err error) (idem.Response, string) {
	status, code, fallback, field, details := classify(err)
	if status >= 500 {
		s.log.ErrorContext(c.Request.Context(), "request failed",
			"request_id", requestIDOf(c), "method", c.Request.Method, "path", c.Request.URL.Path,
			"status", status, "code", code, "err", err)
	}
	lang := language(c.GetHeader("Accept-Language"))
	return idem.Response{Status: status, Body: errorJSON(errorBody{Error: errorDetail{
		Code:      code,
		Message:   message(lang, code, fallback, field),
		RequestID: requestIDOf(c),
		Field:     field,
		Details:   details,
	}})}, code
}

// send writes an answer rendered ahead (errorAnswer, holdJSON, or one stored for an
// Idempotency-Key), with the headers an error answer carries: its language, and Retry-After when
// the same request may succeed in a moment (code, when known, says so too).
func send(c *gin.Context, a idem.Response, code string) {
	if a.Status >= 400 {
		if a.Status == http.StatusServiceUnavailable || a.Status == http.StatusTooManyRequests || retryLater[code] {
			if c.Writer.Header().Get("Retry-After") == "" {
				c.Header("Retry-After", "1")
			}
		}
		c.Header("Content-Language", language(c.GetHeader("Accept-Language")))
	}
	c.Data(a.Status, contentTypeJSON, a.Body)
}

// contentTypeJSON is the Content-Type of every JSON answer, the one c.JSON sets.
const contentTypeJSON = "application/json; charset=utf-8"
