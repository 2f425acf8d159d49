package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/enginebench"
	"github.com/slotwheel/slotwheel/engine/enginetest"
)

// BenchmarkHold compares the engine's hold path (validation, grid, script) against the bare hold
// script with precomputed arguments, on one hot slot and spread over 1,000 resources, on the same
// Redis in the same run: compare the holds/s of engine and bare_script within one case.
func BenchmarkHold(b *testing.B) {
	for _, c := range []struct {
		name      string
		resources int
	}{{"hot_slot", 1}, {"1000_resources", 1000}} {
		b.Run(c.name+"/bare_script", func(b *testing.B) {
			f := fixture(b, c.resources)
			run(b, f.BareHold)
		})
		b.Run(c.name+"/engine", func(b *testing.B) {
			f := fixture(b, c.resources)
			run(b, f.EngineHold)
		})
	}
}

func fixture(b *testing.B, resources int) *enginebench.Fixture {
	r := enginetest.NewRedis(b)
	db := enginetest.NewDB(b)
	e, err := engine.New(engine.Options{DB: db.Gorm, Redis: r.Client, Prefix: r.Prefix, HoldTTL: time.Hour})
	require.NoError(b, err)
	f, err := enginebench.NewFixture(context.Background(), e, r.Client, r.Prefix, resources)
	require.NoError(b, err)
	return f
}

func run(b *testing.B, op func(context.Context, uint64) error) {
	var n atomic.Uint64
	b.SetParallelism(16) // 32 goroutines on two cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(context.Background(), n.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "holds/s")
}
