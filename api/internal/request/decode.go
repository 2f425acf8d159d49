// Package request owns how the API reads a request: the body, read once and at most 1 MiB; strict
// JSON decoding into the contract's types (ids as decimal strings, RFC 3339 times with an offset,
// no unknown or repeated fields); path and query parameters; and required fields. It checks only the
// shape of input and leaves every limit and rule to the engine, whose errors name the field. It
// answers failures through package answer and must never import the api package or the engine's
// services.
package request

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/engine/booking"
)

// ID is an id in a request body: a JSON string of decimal digits naming a positive 64-bit number.
// JavaScript clients cannot hold 64-bit numbers, so JSON numbers are refused.
type ID uint64

// UnmarshalJSON implements json.Unmarshaler.
func (id *ID) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '"' {
		return answer.BadRequest("invalid_id", "an id must be a JSON string of decimal digits")
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return answer.BadRequest("invalid_id", "an id must be a JSON string of decimal digits")
	}
	v, ok := ParseID(s)
	if !ok {
		return answer.BadRequest("invalid_id", "an id must be a JSON string of decimal digits")
	}
	*id = ID(v)
	return nil
}

// OptionalID is an id that may be left out, null or "" in a request body (0: none).
type OptionalID uint64

// UnmarshalJSON implements json.Unmarshaler.
func (id *OptionalID) UnmarshalJSON(b []byte) error {
	if string(b) == "null" || string(b) == `""` {
		*id = 0
		return nil
	}
	var v ID
	if err := v.UnmarshalJSON(b); err != nil {
		return err
	}
	*id = OptionalID(v)
	return nil
}

// ParseID reads a positive decimal id of at most 20 digits.
func ParseID(s string) (uint64, bool) {
	if s == "" || len(s) > 20 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil && v > 0
}

// IDOf and TimeOf are what ID and Time make of a string (for PlainOnce).
func IDOf(s string) (ID, bool) { id, ok := ParseID(s); return ID(id), ok }

func TimeOf(s string) (Time, bool) { t, ok := ParseTime(s); return Time{t}, ok }

// Time is a time in a request body: a JSON string in RFC 3339 with an offset, in the years
// MinYear to MaxYear.
type Time struct{ time.Time }

// timeType is how decodeError recognises a refused time.
var timeType = reflect.TypeFor[Time]()

// UnmarshalJSON implements json.Unmarshaler. A refusal is a *json.UnmarshalTypeError of timeType,
// because encoding/json adds the field's path only to that type of error; decodeError turns it into
// 400 invalid_time naming the field.
func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if len(b) == 0 || b[0] != '"' || json.Unmarshal(b, &s) != nil {
		return &json.UnmarshalTypeError{Value: "non-string", Type: timeType}
	}
	v, ok := ParseTime(s)
	if !ok {
		return &json.UnmarshalTypeError{Value: "string", Type: timeType}
	}
	t.Time = v
	return nil
}

// The years a request time may fall in (as written, in its own offset). Year 1 is Go's zero time,
// which the engine reads as "no time given"; nothing slotwheel books is that far off either way.
const (
	MinYear = 2000
	MaxYear = 9999
)

// rfc3339Shaped checks the shape time.Parse is lenient about: a 'T', seconds, and an offset of hours
// 00–23 and minutes 00–59 (time.Parse reads +08:60 as +09:00, and takes +24:00). It is
// YYYY-MM-DD[Tt]hh:mm:ss(.f{1,9})?([Zz]|[+-]hh:mm) of digits, written out rather than a regular
// expression because every hold reads two times and the expression cost more than the rest of the
// decoding (FuzzParseTime holds it to the expression).
func rfc3339Shaped(s string) bool {
	if len(s) < 20 {
		return false
	}
	for i := range 19 {
		c := s[i]
		switch i {
		case 4, 7:
			if c != '-' {
				return false
			}
		case 10:
			if c != 'T' && c != 't' {
				return false
			}
		case 13, 16:
			if c != ':' {
				return false
			}
		default:
			if !isDigit(c) {
				return false
			}
		}
	}
	rest := s[19:]
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && isDigit(rest[n]) {
			n++
		}
		if n == 1 || n > 10 {
			return false
		}
		rest = rest[n:]
	}
	if rest == "Z" || rest == "z" {
		return true
	}
	return len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':' &&
		isDigit(rest[1]) && isDigit(rest[2]) && isDigit(rest[4]) && isDigit(rest[5]) &&
		(rest[1] <= '1' || rest[1] == '2' && rest[2] <= '3') && rest[4] <= '5'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// ParseTime reads an RFC 3339 time with an offset in the years MinYear to MaxYear.
func ParseTime(s string) (time.Time, bool) {
	if !rfc3339Shaped(s) {
		return time.Time{}, false
	}
	v, err := time.Parse(time.RFC3339Nano, strings.ToUpper(s))
	if err != nil || v.Year() < MinYear || v.Year() > MaxYear {
		return time.Time{}, false
	}
	return v, true
}

// Decode decodes raw into dst strictly: one JSON object, no unknown or repeated fields, no trailing
// data, the contract's types. Its error is the answer: 400 (or 413, or 422 for a number that does
// not fit its field).
func Decode(raw []byte, dst any) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return answer.BadRequest("invalid_json", "the body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err, raw)
	}
	if name, ok := duplicateName(raw); ok {
		return answer.BadRequest("invalid_json", "the body names a field twice").WithField(name)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return answer.BadRequest("invalid_json", "the body has data after the JSON object")
	}
	return nil
}

// decodeError turns encoding/json's errors into the contract's codes; raw is the body they are of.
func decodeError(err error, raw []byte) error {
	var ae *answer.Error
	if errors.As(err, &ae) {
		return ae
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return answer.ErrBodyTooLarge
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := indexedPath(raw, typeErr)
		if typeErr.Type == timeType {
			return answer.BadRequest("invalid_time", "a time must be an RFC 3339 string with an offset, in the years 2000 to 9999").WithField(field)
		}
		if strings.HasPrefix(typeErr.Value, "number") && isNumberKind(typeErr.Type.Kind().String()) {
			// A number that does not fit: fractional, negative for unsigned, or too large.
			return answer.Unprocessable(booking.CodeFor(typeErr.Field), "the number does not fit the field").WithField(field)
		}
		return answer.BadRequest("invalid_type", "the field has the wrong JSON type").WithField(field)
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return answer.BadRequest("unknown_field", msg).WithField(strings.Trim(rest, `"`))
	}
	return answer.BadRequest("invalid_json", "the body is not valid JSON")
}

// indexedPath is the path of the value encoding/json refused — its Field names it without array
// indices ("weekly.weekdays") — with the indices it has in raw ("weekly[1].weekdays[0]"), as the
// engine's own errors name fields. The value is the last one with those names that starts before
// the refusal's Offset; a refusal by an Unmarshaler (a Time) has no Offset, and then it is the
// first such value that the refused type does not take. It answers Field itself when raw does not
// say more.
func indexedPath(raw []byte, typeErr *json.UnmarshalTypeError) string {
	type level struct {
		key     string // in an object: the name of the value being read
		index   int    // in an array: the index of the value being read
		array   bool
		wantKey bool
	}
	var stack []*level
	path := func(indices bool) string {
		var b strings.Builder
		for _, l := range stack {
			switch {
			case l.array && indices:
				fmt.Fprintf(&b, "[%d]", l.index)
			case !l.array:
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(l.key)
			}
		}
		return b.String()
	}
	// valueDone moves the innermost container past the value just read.
	valueDone := func() {
		if n := len(stack); n > 0 {
			if top := stack[n-1]; top.array {
				top.index++
			} else {
				top.wantKey = true
			}
		}
	}
	// refused reports whether the scalar literal is one the refused type does not take.
	refused := func(literal []byte) bool {
		literal = bytes.TrimLeft(literal, " \t\r\n,:")
		return json.Unmarshal(literal, reflect.New(typeErr.Type).Interface()) != nil
	}
	found := typeErr.Field
	dec := json.NewDecoder(bytes.NewReader(raw))
	for typeErr.Offset == 0 || dec.InputOffset() < typeErr.Offset {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			break
		}
		d, isDelim := tok.(json.Delim)
		if n := len(stack); n > 0 && stack[n-1].wantKey {
			if isDelim { // '}': the object ends
				stack = stack[:n-1]
				valueDone()
				continue
			}
			stack[n-1].key, stack[n-1].wantKey = tok.(string), false
			continue
		}
		if isDelim && d == ']' {
			stack = stack[:len(stack)-1]
			valueDone()
			continue
		}
		if len(stack) > 0 && path(false) == typeErr.Field {
			if typeErr.Offset != 0 {
				found = path(true)
			} else if !isDelim && refused(raw[start:dec.InputOffset()]) {
				return path(true)
			}
		}
		switch {
		case isDelim && d == '{':
			stack = append(stack, &level{wantKey: true})
		case isDelim && d == '[':
			stack = append(stack, &level{array: true})
		default:
			valueDone()
		}
	}
	return found
}

func isNumberKind(kind string) bool {
	return strings.HasPrefix(kind, "int") || strings.HasPrefix(kind, "uint") || strings.HasPrefix(kind, "float")
}

// Missing is the error of a required field left out.
func Missing(field string) *answer.Error {
	return answer.BadRequest("missing_field", "a required field is missing").WithField(field)
}

// duplicateName finds a name given twice in one object of raw's first JSON value, at any depth.
// encoding/json keeps the last of them, another parser the first: a body that says two things
// is refused rather than read one way here and another way by whoever signed or logged it.
func duplicateName(raw []byte) (string, bool) {
	type object struct {
		names   map[string]bool
		wantKey bool
	}
	var open []*object // the objects and arrays (nil) the next token is in
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false // not JSON: Decode has said so already
		}
		var in *object
		if len(open) > 0 {
			in = open[len(open)-1]
		}
		if in != nil && in.wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				open = open[:len(open)-1]
			} else {
				name, _ := tok.(string)
				if in.names[name] {
					return name, true
				}
				in.names[name] = true
				in.wantKey = false
				continue
			}
		} else if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				open = append(open, &object{names: map[string]bool{}, wantKey: true})
				continue
			case '[':
				open = append(open, nil)
				continue
			default: // ']' (a '}' is read where a key may come)
				open = open[:len(open)-1]
			}
		}
		// A value has ended: its object wants a key next; with nothing open, the body has ended.
		if len(open) == 0 {
			return "", false
		}
		if top := open[len(open)-1]; top != nil {
			top.wantKey = true
		}
	}
}
