package notify

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetrySchedule(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	first, ok := NextAttempt(1, t0)
	require.True(t, ok)
	require.LessOrEqual(t, first.Sub(t0), 10*time.Second, "docs/API.md: the first retry within 10 s")

	at, n := t0, 0
	for {
		next, ok := NextAttempt(n+1, at)
		if !ok {
			break
		}
		require.True(t, next.After(at))
		at, n = next, n+1
	}
	require.GreaterOrEqual(t, at.Sub(t0), 24*time.Hour, "docs/API.md: retried for at least 24 h")
	require.Equal(t, at.Sub(t0), RetryWindow())
	_, ok = NextAttempt(0, t0)
	require.False(t, ok, "nothing failed yet: no retry to schedule")
}
