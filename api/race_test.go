package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// TestRaceForTheLastUnits: 200 users race over HTTP for a slot of capacity 3; exactly three get a
// hold, everyone else 409 slot_full, and the slot shows as full.
func TestRaceForTheLastUnits(t *testing.T) {
	t.Parallel()
	hs := newHarness(t, withCapacity(3))
	srv := httptest.NewServer(hs.h)
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	t.Cleanup(client.CloseIdleConnections)

	const users = 200
	start, end := hs.slot(1, 10)
	body := []byte(`{"resource_id":"` + hs.res + `","start":"` + start + `","end":"` + end + `"}`)
	tokens := make([]string, users)
	for i := range tokens {
		tokens[i] = hs.token("racer-"+strconv.Itoa(i), booking.RoleUser, 0)
	}

	statuses := make([]int, users)
	codes := make([]string, users)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/holds", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tokens[i])
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(headerIdempotencyKey, "race-"+strconv.Itoa(i))
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			b := readAll(t, resp)
			validateHTTP(t, req, resp, b)
			statuses[i] = resp.StatusCode
			codes[i] = reply{Body: b}.errorCode()
		}()
	}
	close(gate)
	wg.Wait()

	won := 0
	for i, st := range statuses {
		switch st {
		case http.StatusCreated:
			won++
		case http.StatusConflict:
			require.Equal(t, "slot_full", codes[i])
		default:
			t.Fatalf("user %d got %d (%s)", i, st, codes[i])
		}
	}
	require.Equal(t, 3, won)

	var avail availabilityResponse
	hs.do(http.MethodGet, "/api/v1/availability?resource_id="+hs.res+"&date="+start[:10], "", nil).
		expect(t, http.StatusOK).decode(t, &avail)
	s := slotAt(t, avail, start)
	require.False(t, s.Available)
	require.Equal(t, 0, s.Remaining)
	require.Equal(t, booking.ReasonFull, s.Reason)
}
