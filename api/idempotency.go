package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/api/internal/auth"
	"github.com/slotwheel/slotwheel/api/internal/request"
	"github.com/slotwheel/slotwheel/engine/detach"
	"github.com/slotwheel/slotwheel/engine/idem"
)

// IdempotencyStore keeps the first answer of requests sent with an Idempotency-Key (engine/idem
// has one in SQL and one in Redis). Begin answers nil when the request should run, the stored
// answer of a repeat, idem.ErrKeyReused for the same key with another body and idem.ErrInProgress
// while the first request runs.
type IdempotencyStore interface {
	Begin(ctx context.Context, scope, requestHash string) (*idem.Response, error)
	Finish(ctx context.Context, scope string, r idem.Response) error
	Abandon(ctx context.Context, scope string) error
}

// headerIdempotencyKey and headerReplayed are the idempotency headers.
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerReplayed       = "Idempotent-Replayed"
)

// idempotencyKeyOf reads the request's Idempotency-Key: keyed is false without one, and a key sent
// twice or with other than 1..255 visible ASCII characters is answer.ErrInvalidIdempotency.
func idempotencyKeyOf(c *gin.Context) (key string, keyed bool, err error) {
	values := c.Request.Header.Values(headerIdempotencyKey)
	switch {
	case len(values) == 0:
		return "", false, nil
	case len(values) > 1 || !validIdempotencyKey(values[0]):
		return "", false, answer.ErrInvalidIdempotency
	}
	return values[0], true, nil
}

// idempotent makes a POST with an Idempotency-Key answer the same way every time: the first request
// runs and its 2xx or 4xx answer is stored; a repeat with the same body gets the stored answer; a 5xx
// is forgotten so that a retry runs again. Without a store the header is ignored. out answers the
// failures, and its log takes a record that could not be settled.
func idempotent(store IdempotencyStore, out answer.Failer) gin.HandlerFunc {
	return func(c *gin.Context) {
		key, keyed, err := idempotencyKeyOf(c)
		if err != nil {
			out.Fail(c, err)
			return
		}
		if !keyed || store == nil {
			c.Next()
			return
		}
		scope := idempotencyScope(auth.Caller(c), c.Request.Method, c.Request.URL.Path, key)
		sum := sha256.Sum256(request.Body(c))
		ctx := c.Request.Context()

		stored, err := store.Begin(ctx, scope, hex.EncodeToString(sum[:]))
		if err != nil {
			out.Fail(c, err)
			return
		}
		if stored != nil {
			c.Header(headerReplayed, "true")
			c.Data(stored.Status, "application/json; charset=utf-8", stored.Body)
			c.Abort()
			return
		}

		w := &capturingWriter{ResponseWriter: c.Writer}
		c.Writer = w
		finished := false
		defer func() {
			c.Writer = w.ResponseWriter
			// The record must be settled even when the client has gone away. A panicking handler
			// (finished is false) answers 500, so its reservation is given up like any 5xx.
			sctx, cancel := detach.Later(ctx)
			defer cancel()
			status := w.Status()
			var err error
			if !finished || status >= 500 {
				err = store.Abandon(sctx, scope)
			} else {
				err = store.Finish(sctx, scope, idem.Response{Status: status, Body: w.buf.Bytes()})
			}
			if err != nil {
				out.Log.ErrorContext(ctx, "idempotency record not settled",
					"request_id", answer.RequestIDOf(c), "path", c.Request.URL.Path, "status", status, "err", err)
			}
		}()
		c.Next()
		finished = true
	}
}

// idempotencyScope names a key within its caller, method and path. It is hashed because the parts
// together may exceed what the store keeps (255 characters), and must not collide when they do.
func idempotencyScope(caller, method, path, key string) string {
	h := sha256.New()
	for _, part := range []string{caller, method, path, key} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return "idem:" + hex.EncodeToString(h.Sum(nil))
}

// validIdempotencyKey accepts 1..255 visible ASCII characters.
func validIdempotencyKey(k string) bool {
	if k == "" || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// capturingWriter copies the body written through it.
type capturingWriter struct {
	gin.ResponseWriter
	buf bytes.Buffer
}

func (w *capturingWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *capturingWriter) WriteString(s string) (int, error) {
	w.buf.WriteString(s)
	return w.ResponseWriter.WriteString(s)
}
