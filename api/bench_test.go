package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/internal/bench"
	"github.com/slotwheel/slotwheel/internal/testenv/faultproxy"
)

// BenchmarkHTTPHold measures POST /api/v1/holds end to end over HTTP (JWT, strict decoding, the
// engine's hold script and the JSON answer) with vegeta as the load generator, against the bare hold
// script measured in the same run on the same Redis — the ratio is what the HTTP layer and the
// engine cost. Sub-benchmarks:
//
//	bare_script          the Lua script alone, 32 goroutines, precomputed arguments
//	max                  HTTP at full speed, 32 workers
//	max_idempotency_key  the same with an Idempotency-Key on every request (two SQL writes each)
//	max_lean_client      max with a lean client instead of vegeta (leanAttack): 32 keep-alive
//	                     connections writing pre-rendered requests and reading answers with
//	                     http.ReadResponse. The client runs in this process too, on the same two
//	                     cores; vegeta's own CPU per request is about the server's, so this rate is
//	                     closer to what the server can do. Every answer must be 201, as for max.
//	half_rate            HTTP at a constant half of max's rate, for its p99
//	mysql_silent         max while MySQL accepts connections and never answers (an outage that
//	                     drops packets), the catalog stale: holds need Redis only (MySQL pass only)
//	mysql_silent_idempotency_key  the same with an Idempotency-Key on every request
//
// Run them together (-bench HTTPHold): half_rate paces itself from max's result; compare the
// mysql_silent rates with max's.
func BenchmarkHTTPHold(b *testing.B) {
	var maxRate float64
	b.Run("bare_script", func(b *testing.B) {
		hs, slots := benchHarness(b)
		benchBareScript(b, hs, slots)
	})
	b.Run("max", func(b *testing.B) {
		hs, slots := benchHarness(b)
		m := attack(b, hs, slots, uint64(b.N), 0, false)
		maxRate = reportAttack(b, m)
	})
	b.Run("max_idempotency_key", func(b *testing.B) {
		hs, slots := benchHarness(b)
		reportAttack(b, attack(b, hs, slots, uint64(b.N), 0, true))
	})
	b.Run("max_lean_client", func(b *testing.B) {
		hs, slots := benchHarness(b)
		leanAttack(b, hs, slots, b.N, 32)
	})
	b.Run("half_rate", func(b *testing.B) {
		if maxRate == 0 {
			b.Skip("needs the max sub-benchmark in the same run")
		}
		hs, slots := benchHarness(b)
		reportAttack(b, attack(b, hs, slots, uint64(b.N), maxRate/2, false))
	})
	for _, withKey := range []bool{false, true} {
		name := "mysql_silent"
		if withKey {
			name += "_idempotency_key"
		}
		b.Run(name, func(b *testing.B) {
			hs, slots, proxy := outageHarness(b)
			proxy.Blackhole(true)
			hs.clock.Advance(time.Minute) // every catalog entry stale: the outage has lasted a while
			reportAttack(b, attack(b, hs, slots, uint64(b.N), 0, withKey))
		})
	}
}

// BenchmarkHoldsThroughOutage measures, on one server in one run, holds per second for 20 s with
// MySQL answering, then for 60 s with MySQL silent (it accepts connections and never answers, an
// outage that drops packets), with and without an Idempotency-Key, and reports the outage's rate as
// a share of the normal one (goal: at least 90%). MySQL pass only. It runs once, whatever b.N.
func BenchmarkHoldsThroughOutage(b *testing.B) {
	for _, withKey := range []bool{false, true} {
		name := "plain"
		if withKey {
			name = "idempotency_key"
		}
		b.Run(name, func(b *testing.B) {
			hs, slots, proxy := outageHarness(b)
			var next atomic.Uint64
			before := reportAttack(b, attackFor(b, hs, slots, &next, 20*time.Second, withKey))
			proxy.Blackhole(true)
			hs.clock.Advance(time.Minute) // every catalog entry stale: the outage has lasted a while
			during := attackFor(b, hs, slots, &next, 60*time.Second, withKey)
			proxy.Blackhole(false)
			rate := float64(during.Requests) / (during.Duration + during.Wait).Seconds()
			b.ReportMetric(rate, "outage-req/s")
			b.ReportMetric(float64(during.Latencies.P99.Microseconds())/1000, "outage-p99-ms")
			b.ReportMetric(100*rate/before, "outage-%")
			b.Logf("%s: %.0f holds/s with MySQL, %.0f/s during 60 s of silent MySQL (%.0f%%), p99 %v",
				name, before, rate, 100*rate/before, during.Latencies.P99)
		})
	}
}

// attackFor sends holds as fast as 32 workers go for d, every one of which must succeed; next
// carries on the numbering (users, slots, keys) across attacks on one harness.
func attackFor(b *testing.B, hs *harness, slots []benchSlot, next *atomic.Uint64, d time.Duration, withKey bool) vegeta.Metrics {
	return attackWith(b, hs, slots, next, durationPacer{d: d}, 32, withKey)
}

// durationPacer sends hits as fast as the workers allow until d has passed.
type durationPacer struct{ d time.Duration }

func (p durationPacer) Pace(elapsed time.Duration, _ uint64) (time.Duration, bool) {
	return 0, elapsed >= p.d
}

func (durationPacer) Rate(time.Duration) float64 { return 0 }

type benchSlot struct {
	start, end string
	at         time.Time
	day        string
}

// benchHarness makes a resource with room for every hold of the run, on 13 days × 14 hourly slots
// that are loaded into Redis before the clock starts.
// outageHarness is a bench harness whose MySQL sits behind a proxy that can go silent, with a hold
// sold already: a live server has sold holds before an outage, so its catalog (rules included) is
// cached. The embedded SQLite is in-process and has no outage to measure: the benchmark is skipped.
func outageHarness(b *testing.B) (*harness, []benchSlot, *faultproxy.Proxy) {
	var proxy *faultproxy.Proxy
	hs, slots := benchHarness(b, withSQLProxy(&proxy))
	if proxy == nil {
		b.Skip("the embedded SQLite is in-process: there is no outage to measure")
	}
	hs.hold(hs.token("warm", booking.RoleUser, 0), 1, 8)
	return hs, slots, proxy
}

func benchHarness(b *testing.B, options ...harnessOption) (*harness, []benchSlot) {
	hs := newHarness(b, append([]harnessOption{withCapacity(1_000_000)}, options...)...)
	resID, _ := strconv.ParseUint(hs.res, 10, 64)
	var slots []benchSlot
	for day := 1; day <= 13; day++ {
		for hour := 8; hour < 22; hour++ {
			s, e := hs.slot(day, hour)
			t, _ := time.Parse(time.RFC3339, s)
			slots = append(slots, benchSlot{start: s, end: e, at: t, day: t.In(hs.loc).Format("2006-01-02")})
		}
		s, _ := hs.slot(day, 8)
		_, err := hs.eng.Availability(context.Background(), engine.AvailabilityQuery{ResourceID: resID, Date: s[:10]})
		if err != nil {
			b.Fatal(err)
		}
	}
	return hs, slots
}

func benchBareScript(b *testing.B, hs *harness, slots []benchSlot) {
	ctx := context.Background()
	venue, _ := strconv.ParseUint(hs.venue, 10, 64)
	res, _ := strconv.ParseUint(hs.res, 10, 64)
	bare := bench.NewBare(hs.redis.Client, hs.redis.Prefix, hs.clock)
	var next atomic.Uint64
	b.SetParallelism(16) // 32 goroutines on two cores, like the 32 HTTP workers
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			s := slots[i%uint64(len(slots))]
			if err := bare.Hold(ctx, venue, res, s.at, s.at.Add(time.Hour), s.day, "bench-"+strconv.FormatUint(i%1000, 10), i); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// attack sends n holds, each by one of 1,000 users on the next slot round robin, at rate per second
// (0: as fast as 32 workers go).
func attack(b *testing.B, hs *harness, slots []benchSlot, n uint64, rate float64, withKey bool) vegeta.Metrics {
	var pacer vegeta.Pacer = countPacer{n: n}
	workers := uint64(32)
	if rate > 0 {
		pacer = &ratePacer{rate: vegeta.Rate{Freq: int(rate), Per: time.Second}, n: n}
		workers = 256 // a paced attack must never wait for a free worker, or it measures the queue
	}
	var next atomic.Uint64
	return attackWith(b, hs, slots, &next, pacer, workers, withKey)
}

// attackWith sends holds paced by pacer with workers, each by one of 1,000 users on the next slot
// round robin, numbered from next; every one must succeed.
func attackWith(b *testing.B, hs *harness, slots []benchSlot, next *atomic.Uint64, pacer vegeta.Pacer, workers uint64, withKey bool) vegeta.Metrics {
	srv := httptest.NewServer(hs.h)
	b.Cleanup(srv.Close)
	const users = 1000
	tokens := make([]string, users)
	for i := range tokens {
		tokens[i] = "Bearer " + hs.token("bench-"+strconv.Itoa(i), booking.RoleUser, 0)
	}
	targeter := func(t *vegeta.Target) error {
		i := next.Add(1) - 1
		s := slots[i%uint64(len(slots))]
		t.Method = http.MethodPost
		t.URL = srv.URL + "/api/v1/holds"
		t.Body = []byte(`{"resource_id":"` + hs.res + `","start":"` + s.start + `","end":"` + s.end + `"}`)
		t.Header = http.Header{"Authorization": {tokens[i%users]}, "Content-Type": {"application/json"}}
		if withKey {
			t.Header.Set(headerIdempotencyKey, "bench-"+strconv.FormatUint(i, 10))
		}
		return nil
	}
	attacker := vegeta.NewAttacker(vegeta.Workers(workers), vegeta.MaxWorkers(workers), vegeta.KeepAlive(true),
		vegeta.Connections(int(workers)*2), vegeta.Timeout(30*time.Second))
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
	return m
}

func reportAttack(b *testing.B, m vegeta.Metrics) float64 {
	rate := 0.0
	if elapsed := m.Duration + m.Wait; elapsed > 0 {
		rate = float64(m.Requests) / elapsed.Seconds()
	}
	b.ReportMetric(rate, "req/s")
	b.ReportMetric(float64(m.Latencies.P50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(m.Latencies.P99.Microseconds())/1000, "p99-ms")
	return rate
}

// countPacer sends n hits as fast as the workers allow, then stops.
type countPacer struct{ n uint64 }

func (p countPacer) Pace(_ time.Duration, hits uint64) (time.Duration, bool) { return 0, hits >= p.n }

func (countPacer) Rate(time.Duration) float64 { return 0 }

// ratePacer sends n hits at a constant rate, then stops.
type ratePacer struct {
	rate vegeta.Rate
	n    uint64
}

func (p *ratePacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= p.n {
		return 0, true
	}
	return p.rate.Pace(elapsed, hits)
}

func (p *ratePacer) Rate(elapsed time.Duration) float64 { return p.rate.Rate(elapsed) }

// leanAttack sends n holds as fast as workers connections go, each by one of 1,000 users on the next
// slot round robin, every one of which must be answered 201, with a client that costs little: each
// worker has a keep-alive connection of its own, writes a request rendered beforehand and reads the
// answer with http.ReadResponse. It reports the rate and the p50 and p99 latencies as reportAttack.
func leanAttack(b *testing.B, hs *harness, slots []benchSlot, n, workers int) {
	srv := httptest.NewServer(hs.h)
	b.Cleanup(srv.Close)
	const users = 1000
	host := strings.TrimPrefix(srv.URL, "http://")
	tokens := make([]string, users)
	for i := range tokens {
		tokens[i] = hs.token("bench-"+strconv.Itoa(i), booking.RoleUser, 0)
	}
	bodies := make([]string, len(slots)) // each with its headers' tail
	for i, s := range slots {
		body := `{"resource_id":"` + hs.res + `","start":"` + s.start + `","end":"` + s.end + `"}`
		bodies[i] = "\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	head := "POST /api/v1/holds HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer "
	conns := make([]net.Conn, workers)
	for w := range conns {
		c, err := net.Dial("tcp", host)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		conns[w] = c
	}
	latencies := make([]time.Duration, n)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for _, c := range conns {
		wg.Go(func() {
			br := bufio.NewReader(c)
			var req []byte
			for {
				i := int(next.Add(1) - 1)
				if i >= n || failed.Load() != nil {
					return
				}
				t0 := time.Now()
				req = append(append(append(req[:0], head...), tokens[i%users]...), bodies[i%len(bodies)]...)
				if _, err := c.Write(req); err != nil {
					failed.Store(&err)
					return
				}
				resp, err := http.ReadResponse(br, nil)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusCreated {
						err = fmt.Errorf("hold %d answered %d", i, resp.StatusCode)
					}
				}
				if err != nil {
					failed.Store(&err)
					return
				}
				latencies[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatalf("not every hold succeeded: %v", *err)
	}
	slices.Sort(latencies)
	b.ReportMetric(float64(n)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(latencies[n*50/100].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[n*99/100].Microseconds())/1000, "p99-ms")
}
