// Package detach gives work that must finish even when the request that started it ends (giving
// units back, settling a hold, recording an answer) a context of its own.
package detach

import (
	"context"
	"time"
)

// Timeout bounds detached work: it must not outlive a stuck backend forever.
const Timeout = 5 * time.Second

// Later is a context that keeps ctx's values but not its cancellation, and ends after Timeout.
func Later(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), Timeout)
}
