package snapshot

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

var depth = prometheus.NewDesc("test_depth", "A depth.", []string{"queue"}, nil)

// gather scrapes c through a registry, as /metrics does, and answers each series as
// name{label=value,...} → value.
func gather(t *testing.T, c *Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
	return out
}

const stamp = "slotwheel_snapshot_last_success_timestamp_seconds{snapshot=test}"

// A scrape whose backend does not answer returns within Wait with what it has; the reading that
// comes in later is kept, and an older reading finishing after a newer one does not replace it.
func TestSlowBackendNeverHoldsTheScrape(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var calls atomic.Int32
	c := New(Config{Name: "test", Descs: []*prometheus.Desc{depth}, Wait: 50 * time.Millisecond, MaxAge: time.Hour},
		func(ctx context.Context) ([]Value, error) {
			if calls.Add(1) == 1 {
				<-release // the backend hangs on the first reading
				return []Value{{Desc: depth, Value: 1, Labels: []string{"old"}}}, nil
			}
			return []Value{{Desc: depth, Value: 2, Labels: []string{"new"}}}, nil
		})

	began := time.Now()
	got := gather(t, c)
	require.Less(t, time.Since(began), 2*time.Second, "the scrape did not wait for the hung backend")
	require.Equal(t, map[string]float64{stamp: 0}, got, "nothing read yet: only the timestamp, at 0")

	c.mu.Lock()
	first := c.running
	c.mu.Unlock()
	require.NotNil(t, first, "the hung reading is still in flight")
	require.Equal(t, map[string]float64{stamp: 0}, gather(t, c), "a second scrape does not start a second reading")
	require.EqualValues(t, 1, calls.Load())

	require.NoError(t, c.Refresh(context.Background()))
	close(release)
	<-first
	got = gather(t, c)
	require.Equal(t, 2.0, got["test_depth{queue=new}"])
	require.NotContains(t, got, "test_depth{queue=old}", "the older reading, finishing last, is dropped")
	require.InDelta(t, float64(time.Now().Unix()), got[stamp], 5)
	require.EqualValues(t, 2, calls.Load(), "a fresh snapshot is answered without reading again")
}

// A failed reading keeps the last values and the time they were read, so that the timestamp tells
// how stale they are.
func TestFailedRefreshKeepsLastValues(t *testing.T) {
	t.Parallel()
	fail := false
	c := New(Config{Name: "test", Descs: []*prometheus.Desc{depth}, MaxAge: time.Hour},
		func(ctx context.Context) ([]Value, error) {
			if fail {
				return nil, errors.New("backend down")
			}
			return []Value{{Desc: depth, Value: 3, Labels: []string{"q"}}}, nil
		})
	require.NoError(t, c.Refresh(context.Background()))
	before := gather(t, c)
	require.Equal(t, 3.0, before["test_depth{queue=q}"])

	fail = true
	err := c.Refresh(context.Background())
	require.ErrorContains(t, err, "snapshot test: backend down")
	require.Equal(t, before, gather(t, c))
}

// A reading whose labels do not fit its descriptor fails the scrape loudly instead of dropping
// the series.
func TestBadReadingFailsTheScrape(t *testing.T) {
	t.Parallel()
	c := New(Config{Name: "test", Descs: []*prometheus.Desc{depth}, MaxAge: time.Hour},
		func(ctx context.Context) ([]Value, error) {
			return []Value{{Desc: depth, Value: 1}}, nil // the queue label is missing
		})
	require.NoError(t, c.Refresh(context.Background()))
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	_, err := reg.Gather()
	require.ErrorContains(t, err, "test_depth")
}
