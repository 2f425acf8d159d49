package api

import (
	"context"
	"time"

	"github.com/gin-gonic/gin"
)

// DefaultRequestTimeout bounds an API request when Options.RequestTimeout is not set.
const DefaultRequestTimeout = 10 * time.Second

// requestTimeout gives every API request the deadline d (DefaultRequestTimeout when not positive): a
// request that waits on a silent MySQL (an
// outage that drops packets rather than refusing connections) answers 503 storage_unavailable with
// Retry-After when the deadline passes, instead of hanging until the client gives up (docs/API.md
// "Outages"). What the request already committed stays committed; what it had not is rolled back
// with its connection.
func requestTimeout(d time.Duration) gin.HandlerFunc {
	if d <= 0 {
		d = DefaultRequestTimeout
	}
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), d)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
}
