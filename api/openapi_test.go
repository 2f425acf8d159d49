package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/engine/booking"
)

// TestOpenAPIDocumentsEveryRoute fails on any route of the router that openapi.json lacks.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	doc, _ := loadDoc(t)
	require.Equal(t, "3.0.3", doc.OpenAPI)

	param := regexp.MustCompile(`:([A-Za-z_]+)`)
	seen := map[string]bool{}
	for _, r := range hs.h.Engine.Routes() {
		path := r.Path
		if root, ok := strings.CutSuffix(path, "/*path"); ok {
			// Every file of the embedded H5 build (or console) lives under this one catch-all; the
			// document names its root.
			path = root + "/"
			require.NotNil(t, doc.Paths.Value(path), "openapi.json lacks %s", path)
			require.NotNil(t, doc.Paths.Value(path).Get, "openapi.json lacks GET %s", path)
			continue
		}
		if path == "/monitoring/*any" {
			// The dashboard's UI and API live under this one catch-all; the document names its root.
			path = "/monitoring/"
			if seen[path] {
				continue
			}
			seen[path] = true
			require.NotNil(t, doc.Paths.Value(path), "openapi.json lacks %s", path)
			require.NotNil(t, doc.Paths.Value(path).Get, "openapi.json lacks GET %s", path)
			continue
		}
		path = param.ReplaceAllString(path, "{$1}")
		item := doc.Paths.Value(path)
		require.NotNil(t, item, "openapi.json lacks the path of %s %s", r.Method, r.Path)
		require.NotNil(t, item.GetOperation(r.Method), "openapi.json lacks %s %s", r.Method, path)
	}
	// Sanity: the router has the routes docs/API.md lists, so the loop above saw them.
	require.Greater(t, len(hs.h.Engine.Routes()), 30)

	// And the other way round: nothing documented is missing from the router.
	routes := map[string]bool{}
	for _, r := range hs.h.Engine.Routes() {
		routes[r.Method+" "+param.ReplaceAllString(r.Path, "{$1}")] = true
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			key := method + " " + path
			switch path {
			case "/monitoring/":
				key = method + " /monitoring/*any"
			case "/app/", "/admin/":
				key = method + " " + path + "*path"
			}
			require.True(t, routes[key], "openapi.json documents %s %s, which the router lacks", method, path)
		}
	}
}

// TestOpenAPIEveryOperationHasErrorsAndIDs checks the document's own hygiene: an operationId and a
// default error answer on every operation, and the error schema behind every 4xx.
func TestOpenAPIEveryOperationHasErrorsAndIDs(t *testing.T) {
	t.Parallel()
	doc, _ := loadDoc(t)
	ids := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			require.NotEmpty(t, op.OperationID, "%s %s", method, path)
			require.False(t, ids[op.OperationID], "duplicate operationId %s", op.OperationID)
			ids[op.OperationID] = true
			if strings.HasPrefix(path, "/api/") {
				require.NotNil(t, op.Responses.Default(), "%s %s has no default answer", method, path)
			}
		}
	}
}

func TestServesOpenAPI(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	r := hs.do(http.MethodGet, "/openapi.json", "", nil).expect(t, http.StatusOK)
	var v map[string]any
	r.decode(t, &v)
	require.Equal(t, "3.0.3", v["openapi"])
	require.Contains(t, r.Header.Get("Content-Type"), "application/json")
}

// TestServedOpenAPIIsTheFile: GET /openapi.json answers api/openapi.json byte for byte, so that what
// clients/ts is generated from (the file) is what the server serves.
func TestServedOpenAPIIsTheFile(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	file, err := os.ReadFile("openapi.json")
	require.NoError(t, err)
	r := hs.do(http.MethodGet, "/openapi.json", "", nil).expect(t, http.StatusOK)
	require.True(t, bytes.Equal(file, r.Body), "the served document differs from api/openapi.json")
}

func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	hs.do(http.MethodGet, "/healthz", "", nil).expect(t, http.StatusOK)
	hs.do(http.MethodGet, "/readyz", "", nil).expect(t, http.StatusOK)
	r := hs.do(http.MethodGet, "/metrics", "", nil).expect(t, http.StatusOK)
	require.Contains(t, string(r.Body), "slotwheel_http_requests_total")

	// Without MetricsOnAPI the route is absent (it lives on its own listener).
	off := newHarness(t, withOptions(func(o *Options) { o.MetricsOnAPI = false }))
	off.do(http.MethodGet, "/metrics", "", nil).expect(t, http.StatusNotFound)
}

func TestReadyzDown(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	if hs.redis.Mini == nil {
		t.Skip("needs the embedded Redis to simulate an outage")
	}
	hs.redis.Mini.SetError("LOADING Redis is loading the dataset in memory")
	r := hs.do(http.MethodGet, "/readyz", "", nil).expect(t, http.StatusServiceUnavailable)
	require.Equal(t, "backend_unavailable", r.errorCode())
	require.Equal(t, "1", r.Header.Get("Retry-After"))
	require.NotContains(t, string(r.Body), "LOADING", "the cause stays in the log")
	hs.redis.Mini.SetError("")
	hs.do(http.MethodGet, "/readyz", "", nil).expect(t, http.StatusOK)
}

func TestRequestIDAndLanguage(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)

	r := hs.do(http.MethodGet, "/api/v1/nope", "", nil, header{"X-Request-Id", "client-abc.1"}).expect(t, http.StatusNotFound)
	require.Equal(t, "client-abc.1", r.Header.Get(answer.HeaderRequestID))
	require.Equal(t, "not_found", r.errorCode())

	r = hs.do(http.MethodGet, "/healthz", "", nil, header{"X-Request-Id", "bad id with spaces\n"})
	require.NotEqual(t, "bad id with spaces\n", r.Header.Get(answer.HeaderRequestID))
	require.Regexp(t, `^[0-9a-f]{32}$`, r.Header.Get(answer.HeaderRequestID))

	var en, zh answer.Body
	hs.do(http.MethodGet, "/api/v1/holds", "", nil, header{"Accept-Language", "en-US,en;q=0.9"}).
		expect(t, http.StatusUnauthorized).decode(t, &en)
	hs.do(http.MethodGet, "/api/v1/holds", "", nil, header{"Accept-Language", "zh-CN,zh;q=0.9,en;q=0.8"}).
		expect(t, http.StatusUnauthorized).decode(t, &zh)
	require.Equal(t, "unauthorized", en.Error.Code)
	require.Equal(t, en.Error.Code, zh.Error.Code)
	require.NotEqual(t, en.Error.Message, zh.Error.Message)
	require.Regexp(t, `\p{Han}`, zh.Error.Message)

	// 405 also has the error body.
	r = hs.do(http.MethodPatch, "/api/v1/holds", "", nil).expect(t, http.StatusMethodNotAllowed)
	require.Equal(t, "method_not_allowed", r.errorCode())
}

// TestNoImplicitRedirects: a path with a trailing slash or the wrong case gets the 404 error body
// with X-Request-Id (the middleware runs for NoRoute and NoMethod too), not Gin's bare 301 or 307.
func TestNoImplicitRedirects(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	for _, tc := range []struct{ method, path, token string }{
		{http.MethodGet, "/api/v1/holds/", alice},
		{http.MethodGet, "/api/v1/holds/", ""},
		{http.MethodPost, "/api/v1/holds/", alice},
		{http.MethodGet, "/api/v1/venues/", ""},
		{http.MethodGet, "/API/v1/venues", ""},
		{http.MethodGet, "/api/v1//venues", ""},
		{http.MethodPost, "/api/v1/payments/notify/", ""},
		{http.MethodPost, "/api/v1/auth/dev-login/", ""},
		{http.MethodGet, "/healthz/", ""},
		{http.MethodGet, "/openapi.json/", ""},
	} {
		name := tc.method + " " + tc.path
		var body any
		if tc.method == http.MethodPost {
			body = set{}
		}
		r := hs.do(tc.method, tc.path, tc.token, body, header{"X-Request-Id", "trail-1"})
		require.Equal(t, http.StatusNotFound, r.Status, "%s: %s", name, r.Body)
		require.Empty(t, r.Header.Get("Location"), name)
		require.Contains(t, r.Header.Get("Content-Type"), "application/json", name)
		require.Equal(t, "trail-1", r.Header.Get(answer.HeaderRequestID), name)
		require.Equal(t, "not_found", r.errorCode(), name)
		var e answer.Body
		r.decode(t, &e)
		require.Equal(t, "trail-1", e.Error.RequestID, name)
	}

	// A generated id when the client sends none; 405 goes through the middleware as well.
	r := hs.do(http.MethodGet, "/api/v1/holds/", alice, nil).expect(t, http.StatusNotFound)
	require.Regexp(t, `^[0-9a-f]{32}$`, r.Header.Get(answer.HeaderRequestID))
	r = hs.do(http.MethodPut, "/api/v1/venues", "", nil, header{"X-Request-Id", "nomethod-1"}).
		expect(t, http.StatusMethodNotAllowed)
	require.Equal(t, "nomethod-1", r.Header.Get(answer.HeaderRequestID))
	require.Equal(t, "method_not_allowed", r.errorCode())
}

func TestLanguageChoice(t *testing.T) {
	t.Parallel()
	for header, want := range map[string]string{
		"":                          answer.LangEN,
		"fr-FR":                     answer.LangEN,
		"zh":                        answer.LangZH,
		"zh-Hans-CN":                answer.LangZH,
		"en;q=0.5, zh-CN;q=0.9":     answer.LangZH,
		"zh-CN;q=0, en":             answer.LangEN,
		"de, zh-TW;q=0.3, en;q=0.2": answer.LangZH,
	} {
		require.Equal(t, want, answer.Language(header), "Accept-Language %q", header)
	}
}

func TestNewRequiresSecrets(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	_, err := New(Options{Engine: hs.eng, PaymentSecret: []byte("x")})
	require.Error(t, err)
	_, err = New(Options{Engine: hs.eng, JWTSecret: []byte("x")})
	require.Error(t, err)
	_, err = New(Options{JWTSecret: []byte("x"), PaymentSecret: []byte("x")})
	require.Error(t, err)
	h, err := New(Options{Engine: hs.eng, JWTSecret: []byte("x"), PaymentSecret: []byte("y")})
	require.NoError(t, err)
	_, isGin := h.(*handler)
	require.True(t, isGin)
}

func TestPanicIsA500WithTheErrorBody(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	hs.h.Engine.GET("/test-panic", func(*gin.Context) { panic("secret internals") })
	r := hs.do(http.MethodGet, "/test-panic", "", nil).expect(t, http.StatusInternalServerError)
	require.Equal(t, "internal", r.errorCode())
	require.NotContains(t, string(r.Body), "secret internals")
	var e answer.Body
	require.NoError(t, json.Unmarshal(r.Body, &e))
	require.NotEmpty(t, e.Error.RequestID)
}

// TestHeadIsGetWithoutTheBody: HEAD is answered wherever GET is, with GET's status and headers and
// no body, through a real server (net/http drops the body of a HEAD's answer); a path without GET
// answers HEAD 405, and Allow names HEAD wherever it names GET.
func TestHeadIsGetWithoutTheBody(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	srv := httptest.NewServer(hs.h)
	t.Cleanup(srv.Close)
	send := func(method, path string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		require.NoError(t, err)
		res, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res, body
	}
	for _, path := range []string{"/healthz", "/api/v1/venues", "/openapi.json"} {
		get, getBody := send(http.MethodGet, path)
		head, headBody := send(http.MethodHead, path)
		require.Equal(t, http.StatusOK, get.StatusCode, path)
		require.NotEmpty(t, getBody, path)
		require.Equal(t, get.StatusCode, head.StatusCode, path)
		require.Empty(t, headBody, path)
		require.Equal(t, get.Header.Get("Content-Type"), head.Header.Get("Content-Type"), path)
		require.NotEmpty(t, head.Header.Get(answer.HeaderRequestID), path)
	}
	res, _ := send(http.MethodHead, "/api/v1/auth/dev-login")
	require.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
	require.Equal(t, "POST", res.Header.Get("Allow"))
	res, _ = send(http.MethodPatch, "/api/v1/venues")
	require.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
	require.Contains(t, strings.Split(res.Header.Get("Allow"), ", "), http.MethodHead)
	require.Contains(t, strings.Split(res.Header.Get("Allow"), ", "), http.MethodGet)
}
