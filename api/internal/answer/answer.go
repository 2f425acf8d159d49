// Package answer owns how the API answers a failure: the error type with its status, stable code and
// blamed field, the one mapper from the engine's errors to HTTP (Classify), the message catalog in
// each language, the error body and the headers that go with it, and the request id every answer
// carries. It knows no route; of the engine it imports only engine/booking, engine/idem and engine/wire
// (errors, stored answers, the wire form of values), and must never import the api package.
package answer

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/idem"
	"github.com/slotwheel/slotwheel/engine/wire"
)

// Body is the body of every non-2xx answer.
type Body struct {
	Error Detail `json:"error"`
}

// Detail is what Body says about the failure.
type Detail struct {
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

// Classify is the one error mapper: status, stable code, English fallback message, blamed field and
// details of err. Anything it does not know is a 500 whose cause stays in the log.
func Classify(err error) (status int, code, fallback, field string, details map[string]any) {
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Status, ae.Code, ae.Message, ae.Field, nil
	}
	if ee, ok := booking.AsError(err); ok {
		if st, ok := statusOfKind[ee.Kind]; ok {
			return st, ee.Code, ee.Message, ee.Field, wireDetails(ee.Details)
		}
	}
	return ErrInternal.Status, ErrInternal.Code, ErrInternal.Message, "", nil
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

// Failer answers failures; a server-side one (5xx) is logged with its cause on Log, which must not
// be nil.
type Failer struct {
	Log *slog.Logger
}

// Fail answers c with err mapped to the error body, logs server-side failures with their cause, and
// stops the handler chain.
func (f Failer) Fail(c *gin.Context, err error) {
	a, code := f.ErrorAnswer(c, err)
	Send(c, a, code)
	c.Abort()
}

// ErrorAnswer is the answer to c that err maps to (status and error body), and its code; a
// server-side failure is logged with its cause.
func (f Failer) ErrorAnswer(c *gin.Context, err error) (idem.Response, string) {
	status, code, fallback, field, details := Classify(err)
	if status >= 500 {
		f.Log.ErrorContext(c.Request.Context(), "request failed",
			"request_id", RequestIDOf(c), "method", c.Request.Method, "path", c.Request.URL.Path,
			"status", status, "code", code, "err", err)
	}
	lang := Language(c.GetHeader("Accept-Language"))
	return idem.Response{Status: status, Body: errorJSON(Body{Error: Detail{
		Code:      code,
		Message:   Message(lang, code, fallback, field),
		RequestID: RequestIDOf(c),
		Field:     field,
		Details:   details,
	}})}, code
}

// Send writes an answer rendered ahead (ErrorAnswer, HoldJSON, or one stored for an
// Idempotency-Key), with the headers an error answer carries: its language, and Retry-After when
// the same request may succeed in a moment (code, when known, says so too).
func Send(c *gin.Context, a idem.Response, code string) {
	if a.Status >= 400 {
		if a.Status == http.StatusServiceUnavailable || a.Status == http.StatusTooManyRequests || retryLater[code] {
			if c.Writer.Header().Get("Retry-After") == "" {
				c.Header("Retry-After", "1")
			}
		}
		c.Header("Content-Language", Language(c.GetHeader("Accept-Language")))
	}
	c.Data(a.Status, ContentTypeJSON, a.Body)
}

// ContentTypeJSON is the Content-Type of every JSON answer, the one c.JSON sets.
const ContentTypeJSON = "application/json; charset=utf-8"
