package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/api/internal/request"
	"github.com/slotwheel/slotwheel/engine/booking"
)

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
		err := request.Decode(body, dst)
		if err != nil {
			var ae *answer.Error
			require.True(t, errors.As(err, &ae), "%v (%T) is not an *answer.Error", err, err)
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

// checkDecoded walks a decoded request: every request.ID is positive, every request.Time in the
// years request.MinYear to request.MaxYear.
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
	case request.ID:
		require.Positive(t, uint64(x))
	case request.Time:
		require.True(t, x.Year() >= request.MinYear && x.Year() <= request.MaxYear, "a time of year %d", x.Year())
	default:
		if v.Kind() == reflect.Struct {
			for i := 0; i < v.NumField(); i++ {
				checkDecoded(t, v.Field(i))
			}
		}
	}
}
