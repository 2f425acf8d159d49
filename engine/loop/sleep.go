package loop

import (
	"context"
	"time"
)

// Sleep waits d or until ctx ends, and returns ctx's error if it ended first (or already had, d
// not being positive).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
