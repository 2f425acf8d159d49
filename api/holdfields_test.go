package api

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/api/internal/request"
)

// holdBodies are hold bodies that holdFields reads, and ones it must leave to request.Decode.
var holdBodies = []string{
	`{"resource_id":"12","start":"2026-03-01T08:00:00+08:00","end":"2026-03-01T09:00:00+08:00"}`,
	" \r\n\t{ \"service_id\" : \"3\" , \"start\":\"2026-03-01T08:00:00.5Z\",\"quantity\":2 }\n ",
	`{"resource_id":"1","service_id":"2","start":"2026-03-01t08:00:00z","end":"2026-03-01T09:00:00-01:30","quantity":0}`,
	`{}`, ` { } `, `{"quantity":999999999}`, `{"quantity":1000000000}`, `{"quantity":01}`, `{"quantity":-1}`,
	`{"quantity":1.0}`, `{"quantity":1e2}`, `{"quantity":null}`, `{"quantity":"1"}`, `{"quantity":}`, `{"quantity":1`,
	`{"resource_id":"1","resource_id":"2"}`, `{"start":"2026-03-01T08:00:00Z","start":"2026-03-01T08:00:00Z"}`,
	`{"Resource_ID":"1"}`, `{"resource_id":1}`, `{"resource_id":"0"}`, `{"resource_id":"01"}`, `{"resource_id":"\u0031"}`,
	`{"resource_id":"99999999999999999999"}`, `{"resource_id":null}`, `{"resource_id":""}`,
	`{"start":"2026-03-01 08:00:00Z"}`, `{"start":"1999-12-31T23:59:59Z"}`, `{"start":"2026-02-30T08:00:00Z"}`,
	`{"resources":{"coach":"1"}}`, `{"other":1}`, `{"start":"2026-03-01T08:00:00Z",}`, `{,}`, `{"a"}`, `{"start" "x"}`,
	`{} {}`, `{}x`, `[]`, `""`, ``, `  `, `{`, `}`, "\u00a0{}", "{\"end\":\"2026-03-01T08:00:00Z\"}\u00a0",
	"{\"start\":\"2026-03-01T08:00:00Z\x00\"}", "{\"resource_id\":\"1\xff\"}", `{"resource_id":"1"}}`,
}

func TestHoldFieldsIsDecodeStrict(t *testing.T) {
	read := 0
	for _, body := range holdBodies {
		if checkHoldFields(t, []byte(body)) {
			read++
		}
	}
	require.Equal(t, 7, read, "the bodies holdFields reads by hand")
}

// FuzzHoldFields holds decodeHoldRequest to request.Decode: the same request, or the same error.
func FuzzHoldFields(f *testing.F) {
	for _, body := range holdBodies {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkHoldFields(t, body) })
}

// checkHoldFields fails unless decodeHoldRequest reads body as request.Decode does, and answers
// whether holdFields read it by hand.
func checkHoldFields(t *testing.T, body []byte) bool {
	t.Helper()
	var want, got, fast holdRequest
	werr := request.Decode(body, &want)
	gerr := decodeHoldRequest(body, &got)
	require.Equal(t, werr, gerr, "%q", body)
	require.Equal(t, want, got, "%q", body)
	if !holdFields(body, &fast) {
		return false
	}
	require.NoError(t, werr, "%q is read by hand but refused by request.Decode", body)
	require.Equal(t, want, fast, "%q", body)
	return true
}
