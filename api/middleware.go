package api

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
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

// AccessLogMessage is the message of the access log's line per request: the one line a process
// writes at the rate of its requests, which its log may batch (main's bufferedLog).
const AccessLogMessage = "http request"

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
		s.log.LogAttrs(c.Request.Context(), level, AccessLogMessage,
			slog.String("request_id", requestIDOf(c)),
			slog.String("method", c.Request.Method),
			slog.String("path", c.Request.URL.Path),
			slog.String("route", c.FullPath()),
			slog.Int("status", status),
			slog.Duration("latency", time.Since(start)),
			slog.Int("bytes", c.Writer.Size()),
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

// cors lets the browser pages of the listed origins (H5 pages, a web admin) call the API. Tokens
// travel in the Authorization header, never in cookies, so no credentials mode is needed. A
// preflight from a listed origin is answered 204 here, before routing; any other request only gets
// the headers that let the page read the answer.
func cors(origins []string) gin.HandlerFunc {
	anyOrigin := slices.Contains(origins, "*")
	return func(c *gin.Context) {
		origin := c.GetHeader("Origin")
		c.Header("Vary", "Origin")
		if origin == "" || (!anyOrigin && !slices.Contains(origins, origin)) {
			c.Next()
			return
		}
		h := c.Writer.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Expose-Headers", "X-Request-Id, Retry-After, Content-Language")
		if c.Request.Method == http.MethodOptions && c.GetHeader("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Idempotency-Key, Accept-Language, X-Request-Id")
			h.Set("Access-Control-Max-Age", "600")
			c.AbortWithStatus(http.StatusNoContent)
			return
		}
		c.Next()
	}
}

// strictQuery answers 400 invalid_query to a query string that cannot be parsed (a stray %, a
// broken escape, a semicolon). Go's parser drops such a pair and reads the rest, so
// "?cursor=%zz" would otherwise be answered as the first page, as if no cursor had been sent.
func (s *server) strictQuery(c *gin.Context) {
	if raw := c.Request.URL.RawQuery; raw != "" {
		if _, err := url.ParseQuery(raw); err != nil {
			s.fail(c, badRequest("invalid_query", "the query string cannot be parsed"))
			return
		}
	}
	c.Next()
}
