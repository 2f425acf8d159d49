package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/slotwheel/slotwheel/engine"
)

// maxBody is the largest request body read; larger ones are refused with 413 body_too_large.
const maxBody = 1 << 20

// Context keys.
const (
	ctxRequestID = "slotwheel.request_id"
	ctxBody      = "slotwheel.body"
	ctxActor     = "slotwheel.actor"
)

// headerRequestID is echoed on every answer.
const headerRequestID = "X-Request-Id"

// requestID takes the client's X-Request-Id when it is sane, else makes one, and puts it on the
// answer before anything else can write.
func requestID() gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.GetHeader(headerRequestID)
		if !saneToken(id, 128) {
			id = newRequestID()
		}
		c.Set(ctxRequestID, id)
		c.Header(headerRequestID, id)
		c.Next()
	}
}

func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// saneToken reports whether s is 1..max characters of letters, digits and "-_.:".
func saneToken(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9':
		case ch == '-' || ch == '_' || ch == '.' || ch == ':':
		default:
			return false
		}
	}
	return true
}

func requestIDOf(c *gin.Context) string { return c.GetString(ctxRequestID) }

// accessLog writes one line per request.
func (s *server) accessLog() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		status := c.Writer.Status()
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		}
		s.log.Log(c.Request.Context(), level, "http request",
			"request_id", requestIDOf(c),
			"method", c.Request.Method,
			"path", c.Request.URL.Path,
			"route", c.FullPath(),
			"status", status,
			"latency", time.Since(start),
			"bytes", c.Writer.Size(),
		)
	}
}

// recoverPanics turns a panic into a 500 with the error body; the panic and its stack go to the log
// only.
func (s *server) recoverPanics() gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler { // net/http aborts a response this way; let it through
				panic(p)
			}
			s.log.ErrorContext(c.Request.Context(), "panic in handler",
				"request_id", requestIDOf(c), "method", c.Request.Method, "path", c.Request.URL.Path,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if c.Writer.Written() {
				c.Abort()
				return
			}
			s.fail(c, errInternal)
		}()
		c.Next()
	}
}

var (
	httpRequests = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "slotwheel_http_requests_total",
		Help: "HTTP requests answered, by route template, method and status.",
	}, []string{"route", "method", "status"})
	httpDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "slotwheel_http_request_duration_seconds",
		Help:    "Time to answer an HTTP request, by route template and method.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"route", "method"})
)

// observe records request metrics by route template, so that ids do not explode the label set.
func observe() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		httpRequests.WithLabelValues(route, c.Request.Method, strconv.Itoa(c.Writer.Status())).Inc()
		httpDuration.WithLabelValues(route, c.Request.Method).Observe(time.Since(start).Seconds())
	}
}

// readBody reads the whole body (at most maxBody bytes) once, for hashing, signature checks and
// strict decoding.
func (s *server) readBody(c *gin.Context) {
	raw, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			s.fail(c, errBodyTooLarge)
			return
		}
		s.fail(c, badRequest("invalid_json", "the body could not be read"))
		return
	}
	c.Set(ctxBody, raw)
	c.Request.Body = io.NopCloser(bytes.NewReader(raw))
	c.Next()
}

func bodyOf(c *gin.Context) []byte {
	b, _ := c.Get(ctxBody)
	raw, _ := b.([]byte)
	return raw
}

// headerIdempotencyKey and headerReplayed are the idempotency headers.
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerReplayed       = "Idempotent-Replayed"
)

// idempotent makes a POST with an Idempotency-Key answer the same way every time: the first request
// runs and its 2xx or 4xx answer is stored; a repeat with the same body gets the stored answer; a 5xx
// is forgotten so that a retry runs again.
func (s *server) idempotent(c *gin.Context) {
	values := c.Request.Header.Values(headerIdempotencyKey)
	if len(values) == 0 {
		c.Next()
		return
	}
	if len(values) > 1 || !validIdempotencyKey(values[0]) {
		s.fail(c, errInvalidIdempotency)
		return
	}
	scope := idempotencyScope(callerOf(c), c.Request.Method, c.Request.URL.Path, values[0])
	sum := sha256.Sum256(bodyOf(c))
	ctx := c.Request.Context()

	stored, err := s.eng.BeginIdempotent(ctx, scope, hex.EncodeToString(sum[:]))
	if err != nil {
		s.fail(c, err)
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
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		status := w.Status()
		var err error
		if !finished || status >= 500 {
			err = s.eng.AbandonIdempotent(sctx, scope)
		} else {
			err = s.eng.FinishIdempotent(sctx, scope, engine.StoredResponse{Status: status, Body: w.buf.Bytes()})
		}
		if err != nil {
			s.log.ErrorContext(ctx, "idempotency record not settled",
				"request_id", requestIDOf(c), "path", c.Request.URL.Path, "status", status, "err", err)
		}
	}()
	c.Next()
	finished = true
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
