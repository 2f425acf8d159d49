package jobs

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/internal/testenv"
)

// usedMemory is Redis's used_memory.
func (b *testBundle) usedMemory(t testing.TB) int64 {
	info, err := b.redis.Client.Info(context.Background(), "memory").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}

// BenchmarkRedisBytesPerBooking measures what a confirmed booking costs Redis, with INFO memory over
// 10,000 bookings: beyond the release horizon (its units only) and within it (plus its release
// task). Run it alone on its Redis: other clients' keys would count too.
func BenchmarkRedisBytesPerBooking(b *testing.B) {
	if os.Getenv(testenv.EnvRedis) == "" {
		b.Skip("INFO memory needs a real Redis")
	}
	const n = 10_000
	for _, c := range []struct {
		name    string
		horizon time.Duration
	}{{"beyond_horizon", time.Second}, {"within_horizon", 24 * time.Hour}} {
		b.Run(c.name, func(b *testing.B) {
			tb := setup(b, testConfig{engine: engine.Options{DefaultGrace: 2 * time.Hour, ReleaseHorizon: c.horizon, HoldTTL: time.Hour},
				jobs: Options{}})
			ctx := context.Background()
			_, resourceID := tb.venueWithHall(b, 2*n)
			// One booking first, so that the venue's hashes and the queue exist before measuring.
			_, err := tb.book(ctx, resourceID, "warm-up")
			require.NoError(b, err)
			for b.Loop() {
				before := tb.usedMemory(b)
				var wg sync.WaitGroup
				errs := make(chan error, creators)
				for w := range creators {
					wg.Go(func() {
						for i := w; i < n; i += creators {
							if _, err := tb.book(ctx, resourceID, fmt.Sprintf("mem-%d", i)); err != nil {
								errs <- err
								return
							}
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					require.NoError(b, err)
				}
				b.ReportMetric(float64(tb.usedMemory(b)-before)/n, "bytes/booking")
			}
		})
	}
}
