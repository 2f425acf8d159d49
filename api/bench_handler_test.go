//go:build unix

package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// BenchmarkHoldHandler measures the CPU the server spends on a hold without a client or a
// connection: POST /api/v1/holds handed straight to the handler (middleware, token, decoding, the
// engine, the hold script's round trip through the batcher, the answer) by 32 goroutines, with
// requests built before the clock starts. cpu-µs/op is this process's user+system CPU (getrusage)
// over the run ÷ holds: the server's share of a hold but net/http's reading and writing of it. A real
// Redis (SLOTWHEEL_TEST_REDIS_URL) is a process of its own and is not counted; the embedded one runs
// in this process and is. The figure varies with whatever else shares the CPUs: compare runs made
// back to back. Every answer must be 201.
//
//	plain  no Idempotency-Key
//	keyed  an Idempotency-Key on every request
func BenchmarkHoldHandler(b *testing.B) {
	for _, keyed := range []bool{false, true} {
		name := "plain"
		if keyed {
			name = "keyed"
		}
		b.Run(name, func(b *testing.B) {
			hs, slots := benchHarness(b)
			const users = 1000
			tokens := make([]string, users)
			for i := range tokens {
				tokens[i] = "Bearer " + hs.token("bench-"+strconv.Itoa(i), booking.RoleUser, 0)
			}
			reqs := make([]*http.Request, b.N)
			for i := range reqs {
				s := slots[i%len(slots)]
				body := `{"resource_id":"` + hs.res + `","start":"` + s.start + `","end":"` + s.end + `"}`
				r := httptest.NewRequest(http.MethodPost, "/api/v1/holds", bytes.NewReader([]byte(body)))
				r.Header.Set("Authorization", tokens[i%users])
				r.Header.Set("Content-Type", "application/json")
				if keyed {
					r.Header.Set(headerIdempotencyKey, "bench-"+strconv.Itoa(i))
				}
				reqs[i] = r
			}
			var next, failed atomic.Int64
			b.SetParallelism(16) // 32 goroutines on two cores, like the 32 HTTP workers
			b.ResetTimer()
			before := processCPU()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					w := &statusWriter{header: http.Header{}}
					hs.h.ServeHTTP(w, reqs[next.Add(1)-1])
					if w.status != http.StatusCreated {
						failed.Add(1)
					}
				}
			})
			cpu := processCPU() - before
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d holds were not answered 201", n)
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/1000/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

// statusWriter is a ResponseWriter that keeps the status and drops the body.
type statusWriter struct {
	header http.Header
	status int
}

func (w *statusWriter) Header() http.Header         { return w.header }
func (w *statusWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *statusWriter) WriteHeader(status int)      { w.status = status }

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
