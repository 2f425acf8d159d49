// Package api owns slotwheel's HTTP contract: the Gin router and its routes, idempotency keys and the
// served OpenAPI document, with its parts in api/internal: authentication (auth), reading requests
// strictly (request) and the one error mapper with the answers it writes (answer). Each group of
// routes is a type holding the engine services it calls, declared beside its handlers. Handlers bind
// and validate, call one engine method and convert its answer; the rules live in engine/. It imports
// engine and must never import jobs/ or models/.
package api

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/api/internal/auth"
	"github.com/slotwheel/slotwheel/api/internal/request"
	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/notify/wechatmsg"
)

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

// handler is what New returns: the Gin engine, plus Close for the dashboard's Redis connections.
type handler struct {
	*gin.Engine
	in      request.Reader // reads requests and answers failures, for every route
	tokens  *auth.Tokens
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

// ServeHTTP answers a HEAD request as the GET of the same path would be answered, without the body
// (net/http drops it, since the request it answers is still the HEAD): HTTP requires HEAD wherever
// GET is served, and uptime checks and caches send it. Routes are registered for GET only.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead {
		get := r.Clone(r.Context())
		get.Method = http.MethodGet
		r = get
	}
	h.Engine.ServeHTTP(w, r)
}

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
	in := request.Reader{Failer: answer.Failer{Log: opts.Logger}}
	tokens := auth.NewTokens(opts.JWTSecret, opts.Now, in.Failer)
	eng := opts.Engine

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
	h := &handler{Engine: r, in: in, tokens: tokens}

	r.Use(answer.RequestID(), accessLog(opts.Logger), recoverPanics(in.Failer), observe())
	if len(opts.CORSOrigins) > 0 {
		r.Use(cors(opts.CORSOrigins))
	}
	r.NoRoute(func(c *gin.Context) { in.Fail(c, answer.ErrNotFound) })
	r.NoMethod(func(c *gin.Context) {
		// Gin's Allow lists the methods routed; HEAD goes wherever GET does (ServeHTTP).
		if allow := c.Writer.Header().Get("Allow"); slices.Contains(strings.Split(allow, ", "), http.MethodGet) {
			c.Header("Allow", allow+", "+http.MethodHead)
		}
		in.Fail(c, answer.ErrMethodNotAllowed)
	})

	r.GET("/healthz", healthz)
	r.GET("/readyz", readyz(eng, in.Failer))
	if opts.MetricsOnAPI {
		r.GET("/metrics", gin.WrapH(MetricsHandler()))
	}
	r.GET("/openapi.json", serveOpenAPI)
	app := serveApp(in.Failer)
	r.GET("/app", app)
	r.GET("/app/*path", app)
	// The operator console is public files; what it shows and does needs the operator's token.
	cons := serveConsole(in.Failer)
	r.GET("/admin", cons)
	r.GET("/admin/*path", cons)
	if opts.Asynq != nil {
		mon, err := newDashboard(opts.Asynq)
		if err != nil {
			return nil, err
		}
		h.closers = append(h.closers, mon.Close)
		guard := tokens.Dashboard(opts.DashboardUser, opts.DashboardPassword)
		r.GET("/monitoring", guard, func(c *gin.Context) {
			c.Redirect(http.StatusMovedPermanently, "/monitoring/")
		})
		r.Any("/monitoring/*any", guard, gin.WrapH(mon))
	}

	v1 := r.Group("/api/v1", strictQuery(in.Failer), requestTimeout(opts.RequestTimeout), rateLimit(eng.Holds, in.Failer))

	// Each group of routes gets the engine's services it uses, and nothing else.
	login := &loginRoutes{Reader: in, tokens: tokens, dev: opts.DevLogin, wechatAppID: opts.WechatAppID,
		wechatSecret: opts.WechatSecret, wechatAPIBase: opts.WechatAPIBase, wechat: &http.Client{Timeout: 10 * time.Second}}
	catalogAdmin := &catalogAdminRoutes{Reader: in, catalog: eng.Catalog}
	notify := &notifyRoutes{Reader: in, notifications: eng.Notifications, catalog: eng.Catalog}
	rules := &ruleRoutes{Reader: in, catalog: eng.Catalog, bookings: eng.Bookings, payments: eng.Payments}
	browse := &browseRoutes{Reader: in, catalog: eng.Catalog}
	holds := &holdRoutes{Reader: in, holds: eng.Holds, payments: eng.Payments, devPayments: opts.DevPayments}
	payments := &paymentRoutes{Reader: in, payments: eng.Payments, secret: opts.PaymentSecret, now: opts.Now}
	bookings := &bookingRoutes{Reader: in, bookings: eng.Bookings}
	waitlist := &waitlistRoutes{Reader: in, holds: eng.Holds}

	// Log-in. These create no state, so they take no Idempotency-Key.
	v1.POST("/auth/dev-login", in.ReadBody, login.devLogin)
	v1.POST("/auth/wechat", in.ReadBody, login.wechatLogin)

	idem := idempotent(opts.Idempotency, in.Failer)

	// Deployment-wide settings: admins only.
	admin := v1.Group("/admin", tokens.Require(booking.RoleAdmin))
	admin.POST("/venues", in.ReadBody, idem, catalogAdmin.createVenue)
	admin.PUT("/policies/grace", in.ReadBody, catalogAdmin.setGracePolicy)
	admin.GET("/policies/grace", catalogAdmin.listGracePolicies)
	admin.POST("/webhooks", in.ReadBody, idem, notify.createWebhook)
	admin.GET("/webhooks", notify.listWebhooks)
	admin.DELETE("/webhooks/:id", notify.deleteWebhook)
	admin.GET("/webhooks/:id/deliveries", notify.listDeliveries)
	admin.POST("/webhooks/:id/deliveries/:delivery_id/retry", in.ReadBody, idem, notify.retryDelivery)
	admin.PUT("/notifications/wechat", in.ReadBody, notify.setWechatTemplate)
	admin.GET("/notifications/wechat", notify.listWechatTemplates)
	admin.PUT("/policies/noshow", in.ReadBody, rules.setNoshowPolicy)
	admin.GET("/policies/noshow", rules.getNoshowPolicy)
	admin.GET("/refunds", rules.listRefunds)
	admin.POST("/users/:id/erase", in.ReadBody, idem, bookings.eraseUser)
	ops := &opsRoutes{Reader: in, eng: eng}
	admin.GET("/operations", ops.operations)
	admin.GET("/tasks", ops.tasks)
	admin.POST("/tasks/:queue/:task_id/redrive", in.ReadBody, idem, ops.redrive)
	users := &userRoutes{Reader: in, holds: eng.Holds}
	admin.GET("/users/:id", users.getUser)
	admin.POST("/users/:id/unfreeze", in.ReadBody, idem, users.unfreeze)

	// A venue's catalog and booking rules: its manager, or an admin (the engine checks the venue).
	manage := v1.Group("/admin", tokens.Require(booking.RoleManager, booking.RoleAdmin))
	manage.POST("/resources", in.ReadBody, idem, catalogAdmin.createResource)
	manage.PUT("/resources/:id/schedule", in.ReadBody, catalogAdmin.setSchedule)
	manage.POST("/services", in.ReadBody, idem, catalogAdmin.createService)
	manage.PUT("/venues/:id/release-mode", in.ReadBody, notify.setReleaseMode)
	manage.PUT("/resources/:id/policy", in.ReadBody, rules.setPolicy)
	manage.PATCH("/venues/:id", in.ReadBody, catalogAdmin.updateVenue)
	manage.PATCH("/resources/:id", in.ReadBody, catalogAdmin.updateResource)
	manage.PATCH("/services/:id", in.ReadBody, catalogAdmin.updateService)

	// The front desk: a venue's staff or manager, or an admin.
	desk := v1.Group("/admin", tokens.Require(booking.RoleStaff, booking.RoleManager, booking.RoleAdmin))
	desk.GET("/bookings", bookings.venueBookings)
	desk.GET("/resources/:id/schedule", catalogAdmin.getSchedule)
	desk.POST("/bookings/:id/approve", in.ReadBody, idem, bookings.decision(false, eng.Bookings.Approve))
	desk.POST("/bookings/:id/decline", in.ReadBody, idem, bookings.decision(false, eng.Bookings.Decline))
	desk.POST("/bookings/:id/cancel", in.ReadBody, idem, bookings.decision(true, eng.Bookings.VenueCancel))
	desk.POST("/bookings/:id/restore", in.ReadBody, idem, bookings.decision(false, eng.Bookings.Appeal))

	// Browsing needs no token: mini-program reviews reject forced log-in before browsing.
	v1.GET("/venues", browse.listVenues)
	v1.GET("/resources", browse.listResources)
	v1.GET("/services", browse.listServices)
	v1.GET("/availability", browse.availability)
	v1.GET("/resources/:id/policy", rules.getPolicy)

	anyRole := tokens.Require(booking.Roles()...)
	v1.POST("/holds", anyRole, in.ReadBody, holds.createHold)
	v1.GET("/holds", anyRole, holds.listHolds)
	v1.GET("/holds/:id", anyRole, holds.getHold)
	v1.DELETE("/holds/:id", anyRole, holds.cancelHold)
	v1.POST("/holds/:id/confirm", anyRole, in.ReadBody, idem, holds.confirmHold)
	v1.POST("/holds/:id/wechatpay", anyRole, in.ReadBody, rules.wechatPayParams)

	// The provider authenticates by signature; engine.Pay deduplicates by payment_id.
	v1.POST("/payments/notify", in.ReadBody, payments.paymentNotify)
	// WeChat Pay signs with RSA and encrypts its resource; the engine verifies both.
	v1.POST("/payments/wechatpay/notify", rules.wechatPayNotify)

	v1.GET("/bookings", anyRole, bookings.listBookings)
	v1.GET("/bookings/:id", anyRole, bookings.getBooking)
	v1.GET("/bookings/:id/history", anyRole, bookings.bookingHistory)
	v1.GET("/bookings/:id/checkin.png", anyRole, bookings.checkinQR)
	v1.POST("/bookings/:id/cancel", anyRole, in.ReadBody, idem, bookings.cancelBooking)
	v1.POST("/bookings/:id/restore", anyRole, in.ReadBody, idem, bookings.restoreBooking)
	v1.POST("/bookings/:id/reschedule", anyRole, in.ReadBody, idem, rules.rescheduleBooking)

	v1.POST("/checkins", tokens.Require(booking.RoleStaff, booking.RoleManager, booking.RoleAdmin), in.ReadBody, idem, bookings.checkIn)

	v1.POST("/waitlist", anyRole, in.ReadBody, idem, waitlist.joinWaitlist)
	v1.GET("/waitlist", anyRole, waitlist.listWaitlist)
	v1.DELETE("/waitlist/:id", anyRole, waitlist.leaveWaitlist)

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
