package request

import (
	"bytes"
	"regexp"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/api/internal/answer"
)

// Reader reads a request's input for a handler. Each method answers the failure itself (through the
// embedded Failer, which handlers use for their own failures too) and says false, so that a handler
// only returns.
type Reader struct {
	answer.Failer
}

// Bind decodes the body read by ReadBody into dst strictly (Decode). On failure it answers 400 (or
// 413) and returns false.
func (r Reader) Bind(c *gin.Context, dst any) bool {
	if err := Decode(Body(c), dst); err != nil {
		r.Fail(c, err)
		return false
	}
	return true
}

// BindEmpty accepts an empty body or an empty JSON object, for POSTs that take no input.
func (r Reader) BindEmpty(c *gin.Context) bool { return r.BindOptional(c, &struct{}{}) }

// BindOptional is Bind for a body that may be left out (dst keeps its zero value then).
func (r Reader) BindOptional(c *gin.Context, dst any) bool {
	if len(bytes.TrimSpace(Body(c))) == 0 {
		return true
	}
	return r.Bind(c, dst)
}

// PathID reads the numeric :id of the path; anything else names no object (404).
func (r Reader) PathID(c *gin.Context) (uint64, bool) {
	id, ok := ParseID(c.Param("id"))
	if !ok {
		r.Fail(c, answer.ErrNotFound)
	}
	return id, ok
}

// PathHoldID reads the opaque hold :id of the path.
func (r Reader) PathHoldID(c *gin.Context) (string, bool) {
	id := c.Param("id")
	if !answer.SaneToken(id, 64) {
		r.Fail(c, answer.ErrNotFound)
		return "", false
	}
	return id, true
}

// QueryID reads an optional numeric id from the query; 0 when absent.
func (r Reader) QueryID(c *gin.Context, name string) (uint64, bool) {
	v, present := c.GetQuery(name)
	if !present || v == "" {
		return 0, true
	}
	id, ok := ParseID(v)
	if !ok {
		r.Fail(c, answer.BadRequest("invalid_id", "an id must be decimal digits").WithField(name))
	}
	return id, ok
}

// QueryLimit reads an optional page size; 0 when absent (the engine's default).
func (r Reader) QueryLimit(c *gin.Context) (int, bool) {
	return r.QueryCount(c, "limit", "invalid_limit")
}

// QueryCount reads an optional positive count from the query, answering code when it is not one; 0
// when absent. Its bounds are the engine's.
func (r Reader) QueryCount(c *gin.Context, name, code string) (int, bool) {
	v, ok := c.GetQuery(name)
	if !ok {
		return 0, true
	}
	n, ok := ParseID(v)
	if !ok || n > 1<<20 {
		r.Fail(c, answer.BadRequest(code, name+" must be a positive number").WithField(name))
		return 0, false
	}
	return int(n), true
}

// QueryDate reads an optional YYYY-MM-DD query parameter.
func (r Reader) QueryDate(c *gin.Context, name string, required bool) (string, bool) {
	v, present := c.GetQuery(name)
	if !present || v == "" {
		if required {
			r.Fail(c, answer.BadRequest("missing_parameter", name+" is required").WithField(name))
			return "", false
		}
		return "", true
	}
	if !ValidDate(v) {
		r.Fail(c, answer.BadRequest("invalid_date", name+" must be YYYY-MM-DD").WithField(name))
		return "", false
	}
	return v, true
}

// FirstError returns the first non-nil error.
func FirstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Required reports a field left out; it returns a nil error (not a typed nil) when present is true.
func Required(field string, present bool) error {
	if !present {
		return Missing(field)
	}
	return nil
}

var dateRe = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)

// ValidDate reports whether v is a date written YYYY-MM-DD.
func ValidDate(v string) bool {
	if !dateRe.MatchString(v) {
		return false
	}
	_, err := time.Parse(time.DateOnly, v)
	return err == nil
}

// Deref reads an optional value, zero when absent.
func Deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
