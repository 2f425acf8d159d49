package api

import (
	"bytes"
	"regexp"
	"time"

	"github.com/gin-gonic/gin"
)

// This package checks only the shape of a request — JSON types, presence of required fields, ids and
// times that parse — and leaves every limit and rule to the engine, whose errors name the field.

// pathID reads the numeric :id of the path; anything else names no object (404).
func (s *server) pathID(c *gin.Context) (uint64, bool) {
	id, ok := parseID(c.Param("id"))
	if !ok {
		s.fail(c, errNotFound)
	}
	return id, ok
}

// pathHoldID reads the opaque hold :id of the path.
func (s *server) pathHoldID(c *gin.Context) (string, bool) {
	id := c.Param("id")
	if !saneToken(id, 64) {
		s.fail(c, errNotFound)
		return "", false
	}
	return id, true
}

// queryID reads an optional numeric id from the query; 0 when absent.
func (s *server) queryID(c *gin.Context, name string) (uint64, bool) {
	v, present := c.GetQuery(name)
	if !present || v == "" {
		return 0, true
	}
	id, ok := parseID(v)
	if !ok {
		s.fail(c, badRequest("invalid_id", "an id must be decimal digits").withField(name))
	}
	return id, ok
}

// queryLimit reads an optional page size; 0 when absent (the engine's default).
func (s *server) queryLimit(c *gin.Context) (int, bool) {
	v, ok := c.GetQuery("limit")
	if !ok {
		return 0, true
	}
	n, ok := parseID(v)
	if !ok || n > 1<<20 {
		s.fail(c, badRequest("invalid_limit", "limit must be a positive number").withField("limit"))
		return 0, false
	}
	return int(n), true
}

// queryDate reads an optional YYYY-MM-DD query parameter.
func (s *server) queryDate(c *gin.Context, name string, required bool) (string, bool) {
	v, present := c.GetQuery(name)
	if !present || v == "" {
		if required {
			s.fail(c, badRequest("missing_parameter", name+" is required").withField(name))
			return "", false
		}
		return "", true
	}
	if !validDate(v) {
		s.fail(c, badRequest("invalid_date", name+" must be YYYY-MM-DD").withField(name))
		return "", false
	}
	return v, true
}

// bindEmpty accepts an empty body or an empty JSON object, for POSTs that take no input.
func (s *server) bindEmpty(c *gin.Context) bool {
	if len(bytes.TrimSpace(bodyOf(c))) == 0 {
		return true
	}
	return s.bind(c, &struct{}{})
}

// firstError returns the first non-nil error.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// required reports a field left out; it returns a nil error (not a typed nil) when present is true.
func required(field string, present bool) error {
	if !present {
		return missing(field)
	}
	return nil
}

var dateRe = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)

func validDate(v string) bool {
	if !dateRe.MatchString(v) {
		return false
	}
	_, err := time.Parse(time.DateOnly, v)
	return err == nil
}

// deref reads an optional value, zero when absent.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
