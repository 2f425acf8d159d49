package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// requireAPIError checks that err is the API's own 400 with code, and answers it.
func requireAPIError(t *testing.T, err error, status int, code string) *apiError {
	t.Helper()
	var ae *apiError
	require.True(t, errors.As(err, &ae), "%v (%T) is not an *apiError", err, err)
	require.Equal(t, status, ae.Status, "%v", err)
	require.Equal(t, code, ae.Code, "%v", err)
	return ae
}

var decimalID = regexp.MustCompile(`^[0-9]{1,20}$`)

// FuzzParseID reads ids from paths, queries and JSON bodies. An id is accepted exactly when it is 1 to
// 20 decimal digits naming a positive 64-bit number; it is shown again as that number; in a body, only
// a JSON string carries it, and anything else is 400 invalid_id.
func FuzzParseID(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string, raw []byte) {
		v, ok := parseID(s)
		n, err := strconv.ParseUint(s, 10, 64)
		require.Equal(t, decimalID.MatchString(s) && err == nil && n > 0, ok, "%q", s)
		if ok {
			require.Equal(t, n, v)
			require.Equal(t, strings.TrimLeft(s, "0"), formatID(v), "%q is shown otherwise", s)
			back, ok := parseID(formatID(v))
			require.True(t, ok && back == v, "%d does not read back", v)
		}

		quoted, err := json.Marshal(s)
		require.NoError(t, err)
		var id jsonID
		err = id.UnmarshalJSON(quoted)
		if ok {
			require.NoError(t, err)
			require.Equal(t, v, uint64(id))
		} else {
			requireAPIError(t, err, http.StatusBadRequest, "invalid_id")
		}
		var opt optionalID
		err = opt.UnmarshalJSON(quoted)
		if ok || s == "" {
			require.NoError(t, err)
			require.Equal(t, v, uint64(opt), "%q", s)
		} else {
			requireAPIError(t, err, http.StatusBadRequest, "invalid_id")
		}

		// Any JSON value at all: a string of digits or a refusal, never a number taken as an id.
		if !json.Valid(raw) {
			return
		}
		if err := id.UnmarshalJSON(raw); err != nil {
			requireAPIError(t, err, http.StatusBadRequest, "invalid_id")
			return
		}
		var text string
		require.NoError(t, json.Unmarshal(raw, &text), "%s is taken as an id but is no JSON string", raw)
		back, ok := parseID(text)
		require.True(t, ok && back == uint64(id))
	})
}

// rfc3339 is the shape of a request time (see rfc3339Shaped, which must agree with it).
var rfc3339 = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$`)

// FuzzParseTime reads request times and dates. A time is accepted only in RFC 3339 with seconds and
// an offset, in the years 2000 to 9999 as written; it reads as time.Parse reads it, and what the API
// writes of it (to the second, in its offset) reads back as the same instant in the same offset —
// the very text, when that was already in the API's form. In a body a refusal is 400 invalid_time
// naming the field. A date is accepted exactly when it is a real YYYY-MM-DD day written as Go writes
// it.
func FuzzParseTime(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := parseTime(s)
		if shaped := rfc3339.MatchString(s); shaped != rfc3339Shaped(s) {
			t.Fatalf("%q: the expression says %v, rfc3339Shaped %v", s, shaped, !shaped)
		}
		if ok {
			require.Regexp(t, rfc3339, s)
			require.True(t, v.Year() >= minYear && v.Year() <= maxYear, "%q is in year %d", s, v.Year())
			ref, err := time.Parse(time.RFC3339Nano, strings.ToUpper(s))
			require.NoError(t, err)
			require.True(t, ref.Equal(v), "%q reads as %v, not %v", s, v, ref)
			shown := formatTime(v)
			back, ok := parseTime(shown)
			require.True(t, ok, "%q, as shown (%q), is refused", s, shown)
			require.True(t, back.Equal(v.Truncate(time.Second)), "%q is shown as %q", s, shown)
			_, was := v.Zone()
			_, is := back.Zone()
			require.Equal(t, was, is, "%q is shown in another offset", s)
			if !strings.ContainsAny(s, ".tz") && !strings.HasSuffix(s, "+00:00") && !strings.HasSuffix(s, "-00:00") {
				require.Equal(t, s, shown, "a time in the API's own form is shown otherwise")
			}
		}

		body, err := json.Marshal(map[string]string{"start": s})
		require.NoError(t, err)
		var req struct {
			Start *jsonTime `json:"start"`
		}
		err = decodeStrict(body, &req)
		if ok {
			require.NoError(t, err)
			require.True(t, req.Start.Equal(v))
		} else {
			ae := requireAPIError(t, err, http.StatusBadRequest, "invalid_time")
			require.Equal(t, "start", ae.Field)
		}

		day, err := time.Parse(time.DateOnly, s)
		require.Equal(t, err == nil && day.Format(time.DateOnly) == s, validDate(s), "date %q", s)
	})
}

// requestTypes are the bodies the API decodes, each a constructor of the handler's own type.
var requestTypes = []func() any{
	func() any { return &holdRequest{} }, func() any { return &scheduleRequest{} }, func() any { return &serviceRequest{} },
	func() any { return &resourceRequest{} }, func() any { return &venueRequest{} }, func() any { return &gracePolicyRequest{} },
	func() any { return &policyJSON{} }, func() any { return &noshowPolicyJSON{} }, func() any { return &rescheduleRequest{} },
	func() any { return &waitlistRequest{} }, func() any { return &checkinRequest{} }, func() any { return &paymentRequest{} },
	func() any { return &webhookRequest{} }, func() any { return &releaseModeRequest{} }, func() any { return &devLoginRequest{} },
	func() any { return &wechatLoginRequest{} }, func() any { return &wechatTemplateJSON{} }, func() any { return &struct{}{} },
}

// decodeCodes are the codes of a body that does not decode (400); a number that does not fit its
// field is 422 with the field's own code (booking.CodeFor).
var decodeCodes = []string{"invalid_json", "invalid_type", "unknown_field", "invalid_id", "invalid_time"}

// FuzzDecodeStrict decodes any body into every request type of the API. A refusal is the API's
// error: 400 with one of decodeCodes, or 422 with the code of the field whose number does not fit.
// An accepted body is one JSON object and nothing else, decodes to the same value encoding/json's
// plain Unmarshal gives, and every id in it is positive and every time in the years the API takes.
func FuzzDecodeStrict(f *testing.F) {
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		dst := requestTypes[int(kind)%len(requestTypes)]()
		err := decodeStrict(body, dst)
		if err != nil {
			var ae *apiError
			require.True(t, errors.As(err, &ae), "%v (%T) is not an *apiError", err, err)
			switch ae.Status {
			case http.StatusBadRequest:
				require.Contains(t, decodeCodes, ae.Code, "%v", err)
			case http.StatusUnprocessableEntity:
				require.NotEmpty(t, ae.Field, "%v", err)
				require.Equal(t, booking.CodeFor(ae.Field), ae.Code, "%v", err)
			default:
				t.Fatalf("%s refused with %d: %v", body, ae.Status, err)
			}
			return
		}
		require.True(t, json.Valid(body), "%q is accepted but is not one JSON value", body)
		require.True(t, strings.HasPrefix(strings.TrimLeft(string(body), " \t\r\n"), "{"), "%q is accepted but is not an object", body)
		plain := reflect.New(reflect.TypeOf(dst).Elem()).Interface()
		require.NoError(t, json.Unmarshal(body, plain))
		require.Equal(t, plain, dst, "strict decoding reads %q otherwise than encoding/json", body)
		checkDecoded(t, reflect.ValueOf(dst))
	})
}

// checkDecoded walks a decoded request: every jsonID is positive, every jsonTime in minYear–maxYear.
func checkDecoded(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			checkDecoded(t, v.Elem())
		}
		return
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			checkDecoded(t, v.Index(i))
		}
		return
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			checkDecoded(t, it.Value())
		}
		return
	}
	switch x := v.Interface().(type) {
	case jsonID:
		require.Positive(t, uint64(x))
	case jsonTime:
		require.True(t, x.Year() >= minYear && x.Year() <= maxYear, "a time of year %d", x.Year())
	default:
		if v.Kind() == reflect.Struct {
			for i := 0; i < v.NumField(); i++ {
				checkDecoded(t, v.Field(i))
			}
		}
	}
}
