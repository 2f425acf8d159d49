package request

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/engine/wire"
)

// requireAPIError checks that err is the API's own 400 with code, and answers it.
func requireAPIError(t *testing.T, err error, status int, code string) *answer.Error {
	t.Helper()
	var ae *answer.Error
	require.True(t, errors.As(err, &ae), "%v (%T) is not an *answer.Error", err, err)
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
		v, ok := ParseID(s)
		n, err := strconv.ParseUint(s, 10, 64)
		require.Equal(t, decimalID.MatchString(s) && err == nil && n > 0, ok, "%q", s)
		if ok {
			require.Equal(t, n, v)
			require.Equal(t, strings.TrimLeft(s, "0"), wire.ID(v), "%q is shown otherwise", s)
			back, ok := ParseID(wire.ID(v))
			require.True(t, ok && back == v, "%d does not read back", v)
		}

		quoted, err := json.Marshal(s)
		require.NoError(t, err)
		var id ID
		err = id.UnmarshalJSON(quoted)
		if ok {
			require.NoError(t, err)
			require.Equal(t, v, uint64(id))
		} else {
			requireAPIError(t, err, http.StatusBadRequest, "invalid_id")
		}
		var opt OptionalID
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
		back, ok := ParseID(text)
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
		v, ok := ParseTime(s)
		if shaped := rfc3339.MatchString(s); shaped != rfc3339Shaped(s) {
			t.Fatalf("%q: the expression says %v, rfc3339Shaped %v", s, shaped, !shaped)
		}
		if ok {
			require.Regexp(t, rfc3339, s)
			require.True(t, v.Year() >= MinYear && v.Year() <= MaxYear, "%q is in year %d", s, v.Year())
			ref, err := time.Parse(time.RFC3339Nano, strings.ToUpper(s))
			require.NoError(t, err)
			require.True(t, ref.Equal(v), "%q reads as %v, not %v", s, v, ref)
			shown := wire.Time(v)
			back, ok := ParseTime(shown)
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
			Start *Time `json:"start"`
		}
		err = Decode(body, &req)
		if ok {
			require.NoError(t, err)
			require.True(t, req.Start.Equal(v))
		} else {
			ae := requireAPIError(t, err, http.StatusBadRequest, "invalid_time")
			require.Equal(t, "start", ae.Field)
		}

		day, err := time.Parse(time.DateOnly, s)
		require.Equal(t, err == nil && day.Format(time.DateOnly) == s, ValidDate(s), "date %q", s)
	})
}
