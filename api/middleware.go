package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/slotwheel/slotwheel/api/internal/answer"
)

// AccessLogMessage is the message of the access log's line per request: the one line a process
// writes at the rate of its requests, which its log may batch (main's bufferedLog).
const AccessLogMessage = "http request"

// accessLog writes one line per request to log.
func accessLog(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		status := c.Writer.Status()
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		}
		log.LogAttrs(c.Request.Context(), level, AccessLogMessage,
			slog.String("request_id", answer.RequestIDOf(c)),
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
func recoverPanics(out answer.Failer) gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler { // net/http aborts a response this way; let it through
				panic(p)
			}
			out.Log.ErrorContext(c.Request.Context(), "panic in handler",
				"request_id", answer.RequestIDOf(c), "method", c.Request.Method, "path", c.Request.URL.Path,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if c.Writer.Written() {
				c.Abort()
				return
			}
			out.Fail(c, answer.ErrInternal)
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
func strictQuery(out answer.Failer) gin.HandlerFunc {
	return func(c *gin.Context) {
		if raw := c.Request.URL.RawQuery; raw != "" {
			if _, err := url.ParseQuery(raw); err != nil {
				out.Fail(c, answer.BadRequest("invalid_query", "the query string cannot be parsed"))
				return
			}
		}
		c.Next()
	}
}

// rateLimit answers 429 rate_limited to a client address over SLOTWHEEL_RATE_LIMIT_PER_IP, counted in
// Redis so that every instance applies the same number.
// Payment providers' notifications are exempt: a provider is one address sending for every payer,
// and refusing it would only make it retry.
func rateLimit(limiter rateLimiter, out answer.Failer) gin.HandlerFunc {
	return func(c *gin.Context) {
		if strings.HasPrefix(c.Request.URL.Path, "/api/v1/payments/") {
			return
		}
		if err := limiter.AllowRequest(c.Request.Context(), c.ClientIP()); err != nil {
			out.Fail(c, err)
		}
	}
}

// rateLimiter is what rateLimit asks of the engine (engine.Holds).
type rateLimiter interface {
	AllowRequest(ctx context.Context, addr string) error
}
