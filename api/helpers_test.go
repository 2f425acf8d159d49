package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/golang-jwt/jwt/v5"
	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/clock"
	"github.com/slotwheel/slotwheel/engine/idem"
	"github.com/slotwheel/slotwheel/internal/testenv"
	"github.com/slotwheel/slotwheel/internal/testenv/faultproxy"
	"github.com/slotwheel/slotwheel/models"
)

// The venue every harness creates; its zone has no DST, so "tomorrow at 10:00" is always on the grid.
const testZone = "Asia/Shanghai"

var (
	testJWTSecret     = []byte("test-jwt-secret-0123456789abcdef")
	testPaymentSecret = []byte("test-payment-secret-0123456789ab")
	testErasureKey    = []byte("test-erasure-key-0123456789abcdef")
)

// harness is one test's API over a real engine on the test's own backends, with one venue and one
// scheduled resource (hourly slots, 08:00–22:00 every day, 14 days ahead).
type harness struct {
	t      testing.TB
	eng    *engine.Engine
	clock  *clock.Simulated
	opts   Options
	h      *handler
	redis  *testenv.Redis
	loc    *time.Location
	admin  string // an admin token
	venue  string // the venue's id
	res    string // the resource's id
	resCap int
}

type harnessConfig struct {
	capacity int
	opts     func(*Options)
	proxy    **faultproxy.Proxy
}

type harnessOption func(*harnessConfig)

func withCapacity(n int) harnessOption { return func(c *harnessConfig) { c.capacity = n } }

func withOptions(f func(*Options)) harnessOption { return func(c *harnessConfig) { c.opts = f } }

// withSQLProxy puts a fault proxy between the engine and MySQL and stores it in *p; on SQLite, which
// is in-process and has no connection to cut, *p stays nil.
func withSQLProxy(p **faultproxy.Proxy) harnessOption {
	return func(c *harnessConfig) { c.proxy = p }
}

func newHarness(t testing.TB, options ...harnessOption) *harness {
	t.Helper()
	cfg := harnessConfig{capacity: 3}
	for _, o := range options {
		o(&cfg)
	}
	db := testenv.NewDB(t)
	rd := testenv.NewRedis(t)
	clock := clock.NewSimulated(time.Now().UTC().Truncate(time.Second))
	logger := slog.New(slog.DiscardHandler)
	gdb := db.Gorm
	if cfg.proxy != nil && db.MySQL {
		gdb = openThroughProxy(t, db.DSN, cfg.proxy)
	}
	eng, err := engine.New(engine.Options{DB: gdb, Redis: rd.Client, Prefix: rd.Prefix, Clock: clock, Logger: logger,
		ErasureKey: testErasureKey})
	require.NoError(t, err)

	asynqOpt, err := asynq.ParseRedisURI(rd.URL)
	require.NoError(t, err)
	opts := Options{
		Engine:            eng,
		JWTSecret:         testJWTSecret,
		PaymentSecret:     testPaymentSecret,
		DevLogin:          true,
		DevPayments:       true,
		DashboardUser:     "admin",
		DashboardPassword: "dash-pass",
		Asynq:             asynqOpt,
		MetricsOnAPI:      true,
		Logger:            logger,
		Now:               clock.Now,
		Idempotency:       idem.NewSQL(gdb, clock),
	}
	if cfg.opts != nil {
		cfg.opts(&opts)
	}
	h, err := newHandler(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	loc, err := time.LoadLocation(testZone)
	require.NoError(t, err)

	hs := &harness{t: t, eng: eng, clock: clock, opts: opts, h: h, redis: rd, loc: loc, resCap: cfg.capacity}
	hs.admin = hs.token("root", booking.RoleAdmin, 0)

	var v venueResponse
	hs.do(http.MethodPost, "/api/v1/admin/venues", hs.admin, map[string]any{"name": "Court Club", "timezone": testZone}).
		expect(t, http.StatusCreated).decode(t, &v)
	hs.venue = v.VenueID
	hs.res = hs.newResource(cfg.capacity)
	return hs
}

// openThroughProxy opens the MySQL database dsn through a new fault proxy, stored in *p.
func openThroughProxy(t testing.TB, dsn string, p **faultproxy.Proxy) *gorm.DB {
	t.Helper()
	cfg, err := mysqldriver.ParseDSN(dsn)
	require.NoError(t, err)
	*p = faultproxy.New(t, cfg.Addr)
	cfg.Addr = (*p).Addr()
	g, err := models.OpenMySQL(cfg.FormatDSN(), models.Pool{})
	require.NoError(t, err)
	t.Cleanup(func() {
		if s, err := g.DB(); err == nil {
			_ = s.Close()
		}
	})
	return g
}

// newResource creates a scheduled resource of the harness's venue and returns its id.
func (hs *harness) newResource(capacity int) string {
	t := hs.t
	t.Helper()
	var r resourceResponse
	hs.do(http.MethodPost, "/api/v1/admin/resources", hs.admin, map[string]any{
		"venue_id": hs.venue, "name": "Court " + strconv.Itoa(capacity), "kind": "court", "capacity": capacity,
		"category": "tennis", "price_cents": 5000,
	}).expect(t, http.StatusCreated).decode(t, &r)
	hs.do(http.MethodPut, "/api/v1/admin/resources/"+r.ResourceID+"/schedule", hs.admin, map[string]any{
		"slot_minutes": 60,
		"weekly":       []map[string]any{{"weekdays": []int{1, 2, 3, 4, 5, 6, 7}, "open": "08:00", "close": "22:00"}},
		"horizon_days": 14,
	}).expect(t, http.StatusOK)
	return r.ResourceID
}

// slot returns the hour-long slot starting days after today (venue-local) at hour, in RFC 3339.
func (hs *harness) slot(days, hour int) (start, end string) {
	now := hs.clock.Now().In(hs.loc)
	s := time.Date(now.Year(), now.Month(), now.Day()+days, hour, 0, 0, 0, hs.loc)
	return s.Format(time.RFC3339), s.Add(time.Hour).Format(time.RFC3339)
}

// token mints a token the way another tool might: venue_id as a JSON number.
func (hs *harness) token(sub, role string, venueID uint64) string {
	claims := jwt.MapClaims{"sub": sub, "role": role, "exp": hs.clock.Now().Add(time.Hour).Unix()}
	if venueID != 0 {
		claims["venue_id"] = venueID
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(testJWTSecret)
	require.NoError(hs.t, err)
	return tok
}

func (hs *harness) venueNum() uint64 {
	v, err := strconv.ParseUint(hs.venue, 10, 64)
	require.NoError(hs.t, err)
	return v
}

// hold makes a hold on the resource for user and returns it.
func (hs *harness) hold(user string, days, hour int) holdResponse {
	hs.t.Helper()
	start, end := hs.slot(days, hour)
	var h holdResponse
	hs.do(http.MethodPost, "/api/v1/holds", user, map[string]any{"resource_id": hs.res, "start": start, "end": end}).
		expect(hs.t, http.StatusCreated).decode(hs.t, &h)
	return h
}

// booking makes a hold for user and confirms it through dev payments.
func (hs *harness) booking(user string, days, hour int) bookingResponse {
	hs.t.Helper()
	h := hs.hold(user, days, hour)
	var b bookingResponse
	hs.do(http.MethodPost, "/api/v1/holds/"+h.HoldID+"/confirm", user, nil).
		expect(hs.t, http.StatusCreated).decode(hs.t, &b)
	return b
}

// reply is an answer of the handler.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r reply) expect(t testing.TB, status int) reply {
	t.Helper()
	require.Equalf(t, status, r.Status, "body: %s", r.Body)
	return r
}

// decode unmarshals the body into v, zeroed first so that fields the answer omits do not keep the
// values of an earlier answer.
func (r reply) decode(t testing.TB, v any) reply {
	t.Helper()
	reflect.ValueOf(v).Elem().SetZero()
	require.NoErrorf(t, json.Unmarshal(r.Body, v), "body: %s", r.Body)
	return r
}

// errorCode is the error body's code, "" when the body is not an error body.
func (r reply) errorCode() string {
	var e answer.Body
	if json.Unmarshal(r.Body, &e) != nil {
		return ""
	}
	return e.Error.Code
}

// header is a request header for do.
type header struct{ name, value string }

// do sends one request straight to the handler and validates the answer against openapi.json. body
// is sent as is when it is a string or []byte, as JSON otherwise; nil sends no body.
func (hs *harness) do(method, path, token string, body any, headers ...header) reply {
	hs.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		raw, err = json.Marshal(b)
		require.NoError(hs.t, err)
	}
	req := httptest.NewRequest(method, path, bytes.NewReader(raw))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for _, h := range headers {
		req.Header.Add(h.name, h.value)
	}
	rec := httptest.NewRecorder()
	hs.h.ServeHTTP(rec, req)
	r := reply{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
	validateResponse(hs.t, req, r)
	return r
}

// ---- openapi.json ----

var (
	docOnce   sync.Once
	docErr    error
	doc       *openapi3.T
	docRouter routers.Router
)

// loadDoc loads and validates the embedded OpenAPI document once.
func loadDoc(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	docOnce.Do(func() {
		doc, docErr = openapi3.NewLoader().LoadFromData(openAPIDoc)
		if docErr != nil {
			return
		}
		if docErr = doc.Validate(context.Background()); docErr != nil {
			return
		}
		docRouter, docErr = gorillamux.NewRouter(doc)
	})
	require.NoError(t, docErr)
	return doc, docRouter
}

// validateResponse checks an answer against openapi.json: its status, headers and body. Every answer
// must also carry X-Request-Id, and every non-2xx answer the error body (documented or not).
func validateResponse(t testing.TB, req *http.Request, r reply) {
	t.Helper()
	if r.Header.Get(answer.HeaderRequestID) == "" {
		t.Errorf("%s %s: answer %d has no X-Request-Id", req.Method, req.URL.Path, r.Status)
	}
	isDashboard := strings.HasPrefix(req.URL.Path, "/monitoring")
	if r.Status >= 400 {
		var e answer.Body
		if err := json.Unmarshal(r.Body, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" || e.Error.RequestID == "" {
			t.Errorf("%s %s: answer %d has no error body: %s", req.Method, req.URL.Path, r.Status, r.Body)
		} else if e.Error.RequestID != r.Header.Get(answer.HeaderRequestID) && r.Header.Get(headerReplayed) == "" {
			// (A replayed answer is the first answer, byte for byte, request_id included.)
			t.Errorf("%s %s: error body's request_id %q is not the header's %q", req.Method, req.URL.Path, e.Error.RequestID, r.Header.Get(answer.HeaderRequestID))
		}
	}
	if isDashboard && r.Status < 300 {
		return // the dashboard's own UI and JSON API are asynqmon's, not ours
	}
	_, router := loadDoc(t)
	route, params, err := router.FindRoute(req)
	if err != nil {
		return // not a documented route (a 404 or 405 test); the error body was checked above
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 r.Status,
		Header:                 r.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	}
	in.SetBodyBytes(r.Body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s: answer %d does not match openapi.json: %v\nbody: %s", req.Method, req.URL.Path, r.Status, err, r.Body)
	}
}

// validateHTTP validates an answer received over the network.
func validateHTTP(t testing.TB, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	validateResponse(t, req, reply{Status: resp.StatusCode, Header: resp.Header, Body: body})
}

// readAll reads and closes a response body.
func readAll(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return b
}
