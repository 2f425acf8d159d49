package loop

import (
	"context"
	"testing"
	"time"
)

// A loop whose next work falls due before its interval runs when asked to, and a later KickAfter
// takes the place of an earlier one.
func TestKickAfterRunsBeforeTheInterval(t *testing.T) {
	t.Parallel()
	ran := make(chan struct{}, 10)
	l := New(Config{Name: "test_kick_after", Interval: time.Hour}, func(context.Context) error {
		ran <- struct{}{}
		return nil
	})
	l.Start(context.Background())
	defer l.Stop()
	l.KickAfter(time.Hour)
	l.KickAfter(10 * time.Millisecond)
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("no run 10 s after KickAfter(10ms), with an hourly interval")
	}
}
