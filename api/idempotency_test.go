package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/engine/booking"
)

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	bob := hs.token("bob", booking.RoleUser, 0)
	start, end := hs.slot(1, 10)
	body := set{"resource_id": hs.res, "start": start, "end": end}
	key := header{headerIdempotencyKey, "k-1"}

	first := hs.do(http.MethodPost, "/api/v1/holds", alice, body, key).expect(t, http.StatusCreated)
	require.Empty(t, first.Header.Get(headerReplayed))
	again := hs.do(http.MethodPost, "/api/v1/holds", alice, body, key).expect(t, http.StatusCreated)
	require.Equal(t, "true", again.Header.Get(headerReplayed))
	require.Equal(t, string(first.Body), string(again.Body))

	var holds listResponse[holdResponse]
	hs.do(http.MethodGet, "/api/v1/holds", alice, nil).expect(t, http.StatusOK).decode(t, &holds)
	require.Len(t, holds.Items, 1)

	// The same key with another body.
	start2, end2 := hs.slot(1, 11)
	r := hs.do(http.MethodPost, "/api/v1/holds", alice, set{"resource_id": hs.res, "start": start2, "end": end2}, key).
		expect(t, http.StatusUnprocessableEntity)
	require.Equal(t, "idempotency_key_reused", r.errorCode())

	// Keys are scoped to the caller: bob's k-1 is his own.
	var bobs holdResponse
	hs.do(http.MethodPost, "/api/v1/holds", bob, body, key).expect(t, http.StatusCreated).decode(t, &bobs)
	var alices holdResponse
	first.decode(t, &alices)
	require.NotEqual(t, alices.HoldID, bobs.HoldID)

	// ... and to the path: k-1 on confirm is another request.
	var b bookingResponse
	hs.do(http.MethodPost, "/api/v1/holds/"+alices.HoldID+"/confirm", alice, nil, key).expect(t, http.StatusCreated).decode(t, &b)
	replayed := hs.do(http.MethodPost, "/api/v1/holds/"+alices.HoldID+"/confirm", alice, nil, key).expect(t, http.StatusCreated)
	require.Equal(t, "true", replayed.Header.Get(headerReplayed))

	// A 4xx answer is stored too, and replayed.
	off := set{"resource_id": hs.res, "start": strings.Replace(start, ":00:00", ":30:00", 1), "end": end}
	k2 := header{headerIdempotencyKey, "k-2"}
	r1 := hs.do(http.MethodPost, "/api/v1/holds", alice, off, k2).expect(t, http.StatusUnprocessableEntity)
	require.Equal(t, "off_grid", r1.errorCode())
	r2 := hs.do(http.MethodPost, "/api/v1/holds", alice, off, k2).expect(t, http.StatusUnprocessableEntity)
	require.Equal(t, string(r1.Body), string(r2.Body))
	require.Equal(t, "true", r2.Header.Get(headerReplayed))

	// Bad keys.
	for name, hdrs := range map[string][]header{
		"too long":   {{headerIdempotencyKey, strings.Repeat("k", 256)}},
		"empty":      {{headerIdempotencyKey, ""}},
		"twice":      {{headerIdempotencyKey, "a"}, {headerIdempotencyKey, "b"}},
		"non-ASCII":  {{headerIdempotencyKey, "clé"}},
		"with space": {{headerIdempotencyKey, "a b"}},
	} {
		r := hs.do(http.MethodPost, "/api/v1/holds", alice, body, hdrs...)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", name, r.Body)
		require.Equal(t, "invalid_idempotency_key", r.errorCode(), name)
	}
	// 255 characters is fine.
	hs.do(http.MethodPost, "/api/v1/holds", alice, set{"resource_id": hs.res, "start": start2, "end": end2},
		header{headerIdempotencyKey, strings.Repeat("k", 255)}).expect(t, http.StatusCreated)
}

// TestIdempotencyConcurrent: requests racing with one key run once; the others get 409
// request_in_progress or the replayed answer.
func TestIdempotencyConcurrent(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	srv := httptest.NewServer(hs.h)
	t.Cleanup(srv.Close)
	carol := hs.token("carol", booking.RoleUser, 0)
	start, end := hs.slot(1, 10)
	body := []byte(`{"resource_id":"` + hs.res + `","start":"` + start + `","end":"` + end + `"}`)

	const n = 20
	type answer struct {
		status   int
		replayed bool
		body     string
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/holds", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+carol)
			req.Header.Set(headerIdempotencyKey, "race-key")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			b := readAll(t, resp)
			validateHTTP(t, req, resp, b)
			answers[i] = answer{resp.StatusCode, resp.Header.Get(headerReplayed) == "true", string(b)}
		}()
	}
	close(gate)
	wg.Wait()

	var ran []answer
	for _, a := range answers {
		switch {
		case a.status == http.StatusCreated && !a.replayed:
			ran = append(ran, a)
		case a.status == http.StatusCreated && a.replayed:
		case a.status == http.StatusConflict:
			require.Contains(t, a.body, `"request_in_progress"`)
		default:
			t.Fatalf("unexpected answer %d: %s", a.status, a.body)
		}
	}
	require.Len(t, ran, 1, "exactly one request ran")
	for _, a := range answers {
		if a.status == http.StatusCreated {
			require.Equal(t, ran[0].body, a.body)
		}
	}
	var holds listResponse[holdResponse]
	hs.do(http.MethodGet, "/api/v1/holds", carol, nil).expect(t, http.StatusOK).decode(t, &holds)
	require.Len(t, holds.Items, 1)
}

// TestIdempotencyForgetsServerFailures: a 5xx (or a panic) is not stored, so the retry runs again.
func TestIdempotencyForgetsServerFailures(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	in := hs.h.in
	var calls atomic.Int32
	hs.h.Engine.POST("/test-flaky", hs.h.tokens.Require(booking.RoleUser), in.ReadBody, idempotent(hs.opts.Idempotency, in.Failer), func(c *gin.Context) {
		switch calls.Add(1) {
		case 1:
			in.Fail(c, answer.ErrBackendUnavailable)
		case 2:
			panic("boom")
		default:
			c.JSON(http.StatusCreated, gin.H{"call": calls.Load()})
		}
	})
	alice := hs.token("alice", booking.RoleUser, 0)
	key := header{headerIdempotencyKey, "flaky"}
	hs.do(http.MethodPost, "/test-flaky", alice, set{}, key).expect(t, http.StatusServiceUnavailable)
	hs.do(http.MethodPost, "/test-flaky", alice, set{}, key).expect(t, http.StatusInternalServerError)
	first := hs.do(http.MethodPost, "/test-flaky", alice, set{}, key).expect(t, http.StatusCreated)
	again := hs.do(http.MethodPost, "/test-flaky", alice, set{}, key).expect(t, http.StatusCreated)
	require.Equal(t, string(first.Body), string(again.Body))
	require.Equal(t, "true", again.Header.Get(headerReplayed))
	require.Equal(t, int32(3), calls.Load())
}
