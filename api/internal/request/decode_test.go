package request

import (
	"net/http"
	"testing"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// TestTypeErrorsNameTheArrayIndex: a value of the wrong type inside an array is blamed by its path
// with the indices, as the engine's own errors name fields (weekly[1].weekdays), so that a client can
// point at the row it sent wrong.
func TestTypeErrorsNameTheArrayIndex(t *testing.T) {
	t.Parallel()
	type rule struct {
		Weekdays []uint `json:"weekdays"`
		Open     string `json:"open"`
	}
	type exception struct {
		Date string `json:"date"`
		At   Time   `json:"at"`
	}
	type body struct {
		Name       string      `json:"name"`
		Capacity   uint        `json:"capacity"`
		Weekly     []rule      `json:"weekly"`
		Exceptions []exception `json:"exceptions"`
		Nested     struct {
			Rules [][]rule `json:"rules"`
		} `json:"nested"`
	}
	for _, tc := range []struct {
		raw, code, field string
		status           int
	}{
		{`{"name": 5}`, "invalid_type", "name", http.StatusBadRequest},
		{`{"weekly": "always"}`, "invalid_type", "weekly", http.StatusBadRequest},
		{`{"weekly": [{"weekdays": [1]}, {"weekdays": "mon"}]}`, "invalid_type", "weekly[1].weekdays", http.StatusBadRequest},
		{`{"weekly": [{"weekdays": [1, 2]}, {"open": "08:00", "weekdays": [3, "4"]}]}`, "invalid_type", "weekly[1].weekdays[1]", http.StatusBadRequest},
		{`{"weekly": [{"weekdays": [1], "open": 8}]}`, "invalid_type", "weekly[0].open", http.StatusBadRequest},
		// The code of a number that does not fit comes from the names, the field has the indices.
		{`{"weekly": [{"weekdays": [1]}, {"weekdays": [-2]}]}`, booking.CodeFor("weekly.weekdays"), "weekly[1].weekdays[0]", http.StatusUnprocessableEntity},
		{`{"exceptions": [{"date": "2025-05-01", "at": "2025-05-01T10:00:00+08:00"}, {"date": "x", "at": "tomorrow"}]}`,
			"invalid_time", "exceptions[1].at", http.StatusBadRequest},
		{`{"nested": {"rules": [[], [{"weekdays": [1]}, {"weekdays": {}}]]}}`, "invalid_type", "nested.rules[1][1].weekdays", http.StatusBadRequest},
		{`{"capacity": 1.5}`, "invalid_capacity", "capacity", http.StatusUnprocessableEntity},
	} {
		var b body
		err := Decode([]byte(tc.raw), &b)
		if err == nil {
			t.Errorf("%s: decoded", tc.raw)
			continue
		}
		ae := requireAPIError(t, err, tc.status, tc.code)
		if ae.Field != tc.field {
			t.Errorf("%s: field %q, want %q", tc.raw, ae.Field, tc.field)
		}
	}
}
