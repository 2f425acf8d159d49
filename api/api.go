// Package api owns slotwheel's HTTP contract: the Gin router, authentication, strict JSON decoding,
// idempotency keys, the one error mapper and the served OpenAPI document. Handlers bind and validate,
// call one engine method and convert its answer; the rules live in engine/. It imports engine and must
// never import jobs/ or models/.
package api

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/notify/wechatmsg"
)

// tokenTTL is how long a token issued by the log-in routes lasts.
const tokenTTL = 24 * time.Hour

// Options configure the HTTP handler. Engine, JWTSecret and PaymentSecret are required.
type Options struct {
	Engine *engine.Engine

	JWTSecret     []byte // HS256 secret of the Bearer tokens
	PaymentSecret []byte // HMAC secret of payment notifications

	DevLogin    bool // enable POST /api/v1/auth/dev-login
	DevPayments bool // enable POST /api/v1/holds/{id}/confirm

	// WeChat code2Session log-in; the route answers 501 wechat_not_configured without an app id and
	// secret. WechatAPIBase defaults to wechatmsg.DefaultAPIBase (the same host serves log-in) (tests point it at a fake).
	WechatAppID, WechatSecret, WechatAPIBase string

	// HTTP Basic credentials of the dashboard; with an empty password only admin tokens open it.
	DashboardUser, DashboardPassword string
	// Asynq is the queue's Redis, for the dashboard at /monitoring/; nil means no dashboard.
	Asynq asynq.RedisConnOpt

	MetricsOnAPI bool // serve GET /metrics on this handler too

	// CORSOrigins are the origins whose browser pages may call the API ("*": any); empty: CORS off.
	CORSOrigins []string

	// Idempotency keeps the answers of requests sent with an Idempotency-Key; nil turns it off. Holds
	// are the exception: the engine keeps theirs in Redis, written by the hold's own script
	// (engine.HoldOnce), so that holds keep working while MySQL is away and cost one round trip.
	Idempotency IdempotencyStore

	// RequestTimeout bounds every /api/v1 request (default DefaultRequestTimeout).
	RequestTimeout time.Duration

	Logger *slog.Logger     // default slog.Default()
	Now    func() time.Time // default time.Now; used for tokens and payment signatures
}

// server holds what the handlers share.
type server struct {
	opts   Options
	eng    *engine.Engine
	log    *slog.Logger
	now    func() time.Time
	wechat *http.Client
	tokens tokenCache
	hs256  *hs256
}

// handler is what New returns: the Gin engine, plus Close for the dashboard's Redis connections.
type handler struct {
	*gin.Engine
	srv     *server
	closers []func() error
}

// Close releases the dashboard's Redis connections, if any. The handler must not be used after.
func (h *handler) Close() error {
	var errs []error
	for _, f := range h.closers {
		errs = append(errs, f())
	}
	return errors.Join(errs...)
}

var _ io.Closer = (*handler)(nil)

// New builds the API's HTTP handler. The handler also implements io.Closer, which releases the
// dashboard's Redis connections.
func New(opts Options) (http.Handler, error) {
	h, err := newHandler(opts)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// MetricsHandler serves the Prometheus metrics of the process, for a separate listener.
func MetricsHandler() http.Handler { return promhttp.Handler() }

func newHandler(opts Options) (*handler, error) {
	if opts.Engine == nil {
		return nil, errors.New("api: Options.Engine is required")
	}
	if len(opts.JWTSecret) == 0 {
		return nil, errors.New("api: Options.JWTSecret is required")
	}
	if len(opts.PaymentSecret) == 0 {
		return nil, errors.New("api: Options.PaymentSecret is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.WechatAPIBase == "" {
		opts.WechatAPIBase = wechatmsg.DefaultAPIBase
	}
	s := &server{
		opts:   opts,
		eng:    opts.Engine,
		log:    opts.Logger,
		now:    opts.Now,
		wechat: &http.Client{Timeout: 10 * time.Second},
		hs256:  newHS256(opts.JWTSecret),
	}

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	// No implicit redirects: "/api/v1/holds/" or "/API/v1/holds" would get Gin's bare 301/307, without
	// the error body. They fall to NoRoute instead, which answers 404 not_found through the middleware
	// (X-Request-Id included). "/monitoring" → "/monitoring/" is an explicit route below.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.ContextWithFallback = true
	if err := r.SetTrustedProxies(nil); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	h := &handler{Engine: r, srv: s}

	r.Use(requestID(), s.accessLog(), s.recoverPanics(), observe())
	if len(opts.CORSOrigins) > 0 {
		r.Use(cors(opts.CORSOrigins))
	}
	r.NoRoute(func(c *gin.Context) { s.fail(c, errNotFound) })
	r.NoMethod(func(c *gin.Context) { s.fail(c, errMethodNotAllowed) })

	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	if opts.MetricsOnAPI {
		r.GET("/metrics", gin.WrapH(MetricsHandler()))
	}
	r.GET("/openapi.json", serveOpenAPI)
	r.GET("/app", s.serveApp)
	r.GET("/app/*path", s.serveApp)
	if opts.Asynq != nil {
		mon, err := newDashboard(opts.Asynq)
		if err != nil {
			return nil, err
		}
		h.closers = append(h.closers, mon.Close)
		guard := s.dashboardGuard()
		r.GET("/monitoring", guard, func(c *gin.Context) {
			c.Redirect(http.StatusMovedPermanently, "/monitoring/")
		})
		r.Any("/monitoring/*any", guard, gin.WrapH(mon))
	}

	v1 := r.Group("/api/v1", s.strictQuery, s.requestTimeout, s.rateLimit)

	// Log-in. These create no state, so they take no Idempotency-Key.
	v1.POST("/auth/dev-login", s.readBody, s.devLogin)
	v1.POST("/auth/wechat", s.readBody, s.wechatLogin)

	idem := s.idempotent(opts.Idempotency)

	admin := v1.Group("/admin", s.authenticate(booking.RoleAdmin))
	admin.POST("/venues", s.readBody, idem, s.createVenue)
	admin.POST("/resources", s.readBody, idem, s.createResource)
	admin.PUT("/resources/:id/schedule", s.readBody, s.setSchedule)
	admin.POST("/services", s.readBody, idem, s.createService)
	admin.PUT("/policies/grace", s.readBody, s.setGracePolicy)
	admin.PUT("/venues/:id/release-mode", s.readBody, s.setReleaseMode)
	admin.POST("/webhooks", s.readBody, idem, s.createWebhook)
	admin.GET("/webhooks", s.listWebhooks)
	admin.DELETE("/webhooks/:id", s.deleteWebhook)
	admin.GET("/webhooks/:id/deliveries", s.listDeliveries)
	admin.POST("/webhooks/:id/deliveries/:delivery_id/retry", s.readBody, idem, s.retryDelivery)
	admin.PUT("/notifications/wechat", s.readBody, s.setWechatTemplate)
	admin.GET("/notifications/wechat", s.listWechatTemplates)
	admin.PUT("/resources/:id/policy", s.readBody, s.setPolicy)
	admin.PUT("/policies/noshow", s.readBody, s.setNoshowPolicy)
	admin.GET("/policies/noshow", s.getNoshowPolicy)
	admin.GET("/refunds", s.listRefunds)
	admin.POST("/users/:id/erase", s.readBody, idem, s.eraseUser)
	// The front desk's list: staff of the venue, or admin.
	v1.GET("/admin/bookings", s.authenticate(booking.RoleStaff, booking.RoleAdmin), s.venueBookings)

	// Browsing needs no token: mini-program reviews reject forced log-in before browsing.
	v1.GET("/venues", s.listVenues)
	v1.GET("/resources", s.listResources)
	v1.GET("/services", s.listServices)
	v1.GET("/availability", s.availability)
	v1.GET("/resources/:id/policy", s.getPolicy)

	anyRole := s.authenticate(booking.RoleUser, booking.RoleStaff, booking.RoleAdmin)
	v1.POST("/holds", anyRole, s.readBody, s.createHold)
	v1.GET("/holds", anyRole, s.listHolds)
	v1.GET("/holds/:id", anyRole, s.getHold)
	v1.DELETE("/holds/:id", anyRole, s.cancelHold)
	v1.POST("/holds/:id/confirm", anyRole, s.readBody, idem, s.confirmHold)
	v1.POST("/holds/:id/wechatpay", anyRole, s.readBody, s.wechatPayParams)

	// The provider authenticates by signature; engine.Pay deduplicates by payment_id.
	v1.POST("/payments/notify", s.readBody, s.paymentNotify)
	// WeChat Pay signs with RSA and encrypts its resource; the engine verifies both.
	v1.POST("/payments/wechatpay/notify", s.wechatPayNotify)

	v1.GET("/bookings", anyRole, s.listBookings)
	v1.GET("/bookings/:id", anyRole, s.getBooking)
	v1.GET("/bookings/:id/history", anyRole, s.bookingHistory)
	v1.GET("/bookings/:id/checkin.png", anyRole, s.checkinQR)
	v1.POST("/bookings/:id/cancel", anyRole, s.readBody, idem, s.cancelBooking)
	v1.POST("/bookings/:id/restore", anyRole, s.readBody, idem, s.restoreBooking)
	v1.POST("/bookings/:id/reschedule", anyRole, s.readBody, idem, s.rescheduleBooking)

	v1.POST("/checkins", s.authenticate(booking.RoleStaff, booking.RoleAdmin), s.readBody, idem, s.checkIn)

	v1.POST("/waitlist", anyRole, s.readBody, idem, s.joinWaitlist)
	v1.GET("/waitlist", anyRole, s.listWaitlist)
	v1.DELETE("/waitlist/:id", anyRole, s.leaveWaitlist)

	return h, nil
}

// newDashboard builds the Asynq dashboard; asynqmon panics on options it cannot use.
func newDashboard(opt asynq.RedisConnOpt) (h *asynqmon.HTTPHandler, err error) {
	defer func() {
		if p := recover(); p != nil {
			h, err = nil, fmt.Errorf("api: dashboard: %v", p)
		}
	}()
	return asynqmon.New(asynqmon.Options{RootPath: "/monitoring", RedisConnOpt: opt}), nil
}
