package answer

import (
	"encoding/json"
	"strconv"

	"github.com/slotwheel/slotwheel/engine/wire"
)

// The hold answer (201, and the 409 slot_full of a sold-out rush, both rendered for every keyed hold
// before its script runs) is the API's hottest JSON. These encoders write it without reflection,
// byte for byte what encoding/json writes (encode_test holds them to it); whatever they do not
// write by hand — a map, a string that needs escaping — goes through encoding/json.

// HoldJSON is json.Marshal(h).
func HoldJSON(h wire.Hold) []byte {
	if len(h.Resources) > 0 {
		return mustMarshal(h)
	}
	b := make([]byte, 0, 320)
	b = appendField(b, `{"hold_id":`, h.HoldID)
	b = appendField(b, `,"status":`, h.Status)
	b = appendField(b, `,"user_id":`, h.UserID)
	b = appendField(b, `,"venue_id":`, h.VenueID)
	b = appendField(b, `,"resource_id":`, h.ResourceID)
	if h.ServiceID != "" {
		b = appendField(b, `,"service_id":`, h.ServiceID)
	}
	b = append(b, `,"quantity":`...)
	b = strconv.AppendInt(b, int64(h.Quantity), 10)
	b = appendField(b, `,"start":`, h.Start)
	b = appendField(b, `,"end":`, h.End)
	b = appendField(b, `,"expires_at":`, h.ExpiresAt)
	b = append(b, `,"amount_cents":`...)
	b = strconv.AppendInt(b, h.AmountCents, 10)
	if h.BookingID != "" {
		b = appendField(b, `,"booking_id":`, h.BookingID)
	}
	return append(b, '}')
}

// errorJSON is json.Marshal(e).
func errorJSON(e Body) []byte {
	d := e.Error
	if len(d.Details) > 0 {
		return mustMarshal(e)
	}
	b := make([]byte, 0, 64+len(d.Code)+len(d.Message)+len(d.RequestID)+len(d.Field))
	b = appendField(b, `{"error":{"code":`, d.Code)
	b = appendField(b, `,"message":`, d.Message)
	b = appendField(b, `,"request_id":`, d.RequestID)
	if d.Field != "" {
		b = appendField(b, `,"field":`, d.Field)
	}
	return append(b, "}}"...)
}

// appendField appends key (already JSON) and s as a JSON string.
func appendField(b []byte, key, s string) []byte {
	return appendJSONString(append(b, key...), s)
}

// appendJSONString appends s as encoding/json writes a string: as is when every byte is printable
// ASCII that it leaves alone, else through encoding/json itself (control characters, quotes,
// backslashes, the HTML characters <, > and &, and anything beyond ASCII, which it may escape).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return append(b, mustMarshal(s)...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func mustMarshal(v any) []byte {
	body, err := json.Marshal(v)
	if err != nil {
		panic(err) // the API's types always encode
	}
	return body
}
