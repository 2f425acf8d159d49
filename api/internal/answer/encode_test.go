package answer

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/slotwheel/slotwheel/engine/wire"
)

// encodeStrings are strings that encoding/json writes as is, and ones it escapes.
var encodeStrings = []string{"", "h1_00ff", "2026-03-01T08:00:00+08:00", "wx:o6_bmjrPTlm6_2sgVt7hMZOPfL2M@x",
	"<script>", "a&b", `q"uote`, `back\slash`, "tab\there", "nl\n", "\x00\x1f\x7f", "\b\f", "时段已满", "\u2028\u2029",
	"\xff\xfe bad utf-8", "é", "~!#$%'()*+,-./:;=?@[]^_`{|}"}

func TestHoldJSONIsEncodingJSON(t *testing.T) {
	for _, s := range encodeStrings {
		for _, h := range []wire.Hold{
			{HoldID: s, Status: "HELD", UserID: s, VenueID: "1", ResourceID: "2", Quantity: 1, Start: s, End: s, ExpiresAt: s, AmountCents: 12345},
			{HoldID: "h", Status: s, UserID: "u", VenueID: s, ResourceID: s, ServiceID: s, Quantity: -3, AmountCents: -1, BookingID: s},
			{HoldID: "h", ServiceID: "7", BookingID: "9", Resources: map[string]string{"coach": "3", s: s}},
			{},
		} {
			checkEncoding(t, HoldJSON(h), h)
		}
	}
}

func TestErrorJSONIsEncodingJSON(t *testing.T) {
	for _, s := range encodeStrings {
		for _, e := range []Body{
			{Error: Detail{Code: "slot_full", Message: s, RequestID: s}},
			{Error: Detail{Code: s, Message: "m", RequestID: "r", Field: s}},
			{Error: Detail{Code: "c", Message: s, Details: map[string]any{"until": s, "n": 3}}},
			{},
		} {
			checkEncoding(t, errorJSON(e), e)
		}
	}
}

func FuzzHoldJSON(f *testing.F) {
	for _, s := range encodeStrings {
		f.Add(s, s, 1, int64(0))
	}
	f.Fuzz(func(t *testing.T, a, b string, q int, cents int64) {
		h := wire.Hold{HoldID: a, Status: b, UserID: a, VenueID: b, ResourceID: a, ServiceID: b, Quantity: q, Start: a,
			End: b, ExpiresAt: a, AmountCents: cents, BookingID: b}
		checkEncoding(t, HoldJSON(h), h)
		e := Body{Error: Detail{Code: a, Message: b, RequestID: a, Field: b}}
		checkEncoding(t, errorJSON(e), e)
	})
}

// checkEncoding fails unless got is what json.Marshal writes of v.
func checkEncoding(t *testing.T, got []byte, v any) {
	t.Helper()
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
