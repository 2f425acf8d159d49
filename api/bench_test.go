package api

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/slotwheel/slotwheel/engine"
)

// BenchmarkHTTPHold measures POST /api/v1/holds end to end over HTTP (JWT, strict decoding, an
// Idempotency-Key, the engine's hold script and the JSON answer) with vegeta as the load generator,
// 32 workers at full speed. It reports requests per second and the p50 and p99 latencies; the bare
// script's reference number belongs to the engine's own benchmarks.
func BenchmarkHTTPHold(b *testing.B) {
	hs := newHarness(b, withCapacity(maxCapacity))
	srv := httptest.NewServer(hs.h)
	b.Cleanup(srv.Close)

	// Every request is another user's hold on one of the resource's slots, round robin, so that the
	// slots never fill up during the run.
	type slot struct{ start, end string }
	var slots []slot
	for day := 1; day <= 13; day++ {
		for hour := 8; hour < 22; hour++ {
			s, e := hs.slot(day, hour)
			slots = append(slots, slot{s, e})
		}
	}
	const users = 1000
	tokens := make([]string, users)
	for i := range tokens {
		tokens[i] = "Bearer " + hs.token("bench-"+strconv.Itoa(i), engine.RoleUser, 0)
	}
	var next atomic.Uint64
	targeter := func(t *vegeta.Target) error {
		i := next.Add(1) - 1
		s := slots[i%uint64(len(slots))]
		t.Method = http.MethodPost
		t.URL = srv.URL + "/api/v1/holds"
		t.Body = []byte(`{"resource_id":"` + hs.res + `","start":"` + s.start + `","end":"` + s.end + `"}`)
		t.Header = http.Header{
			"Authorization":      {tokens[i%users]},
			"Content-Type":       {"application/json"},
			headerIdempotencyKey: {"bench-" + strconv.FormatUint(i, 10)},
		}
		return nil
	}
	pacer := countPacer{n: uint64(b.N)}
	attacker := vegeta.NewAttacker(vegeta.Workers(32), vegeta.MaxWorkers(32), vegeta.KeepAlive(true),
		vegeta.Connections(64), vegeta.Timeout(30*time.Second))

	var m vegeta.Metrics
	b.ResetTimer()
	for res := range attacker.Attack(targeter, pacer, 0, "hold") {
		m.Add(res)
	}
	b.StopTimer()
	m.Close()

	if m.StatusCodes["201"] != int(m.Requests) {
		b.Fatalf("not every hold succeeded: %v %v", m.StatusCodes, m.Errors)
	}
	elapsed := m.Duration + m.Wait
	if elapsed > 0 {
		b.ReportMetric(float64(m.Requests)/elapsed.Seconds(), "req/s")
	}
	b.ReportMetric(float64(m.Latencies.P50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(m.Latencies.P99.Microseconds())/1000, "p99-ms")
}

// countPacer sends n hits as fast as the workers allow, then stops.
type countPacer struct{ n uint64 }

func (p countPacer) Pace(_ time.Duration, hits uint64) (time.Duration, bool) { return 0, hits >= p.n }

func (countPacer) Rate(time.Duration) float64 { return 0 }
