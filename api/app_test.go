package api

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/api/console"
	"github.com/slotwheel/slotwheel/api/h5app"
)

// TestServesTheApp: /app/ answers the committed H5 build's page, and every script and style the page
// names is served with its type, so a newcomer's browser gets a working app from the binary alone.
func TestServesTheApp(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	index, err := fs.ReadFile(h5app.Files, "index.html")
	require.NoError(t, err)

	for _, path := range []string{"/app/", "/app", "/app/index.html", "/app/bookings"} {
		r := get(hs, http.MethodGet, path).expect(t, http.StatusOK)
		require.Equal(t, string(index), string(r.Body), path)
		require.Contains(t, r.Header.Get("Content-Type"), "text/html", path)
		require.Equal(t, "no-cache", r.Header.Get("Cache-Control"), "%s: a new build must reach browsers", path)
	}

	assets := regexp.MustCompile(`(?:src|href)="(/app/[^"]+)"`).FindAllStringSubmatch(string(index), -1)
	for _, m := range assets {
		r := get(hs, http.MethodGet, m[1]).expect(t, http.StatusOK)
		switch {
		case strings.HasSuffix(m[1], ".js"):
			require.Contains(t, r.Header.Get("Content-Type"), "javascript", m[1])
		case strings.HasSuffix(m[1], ".css"):
			require.Contains(t, r.Header.Get("Content-Type"), "text/css", m[1])
		}
		require.Contains(t, r.Header.Get("Cache-Control"), "immutable", m[1])
	}

	r := get(hs, http.MethodGet, "/app/js/missing.0123abcd.js").expect(t, http.StatusNotFound)
	require.Equal(t, "not_found", r.errorCode(), "a missing asset is not answered with the page")
	get(hs, http.MethodGet, "/app/../openapi.json").expect(t, http.StatusNotFound)
	get(hs, http.MethodPost, "/app/").expect(t, http.StatusMethodNotAllowed)
}

// get sends a request straight to the handler. Not hs.do: kin-openapi cannot check HTML and
// JavaScript bodies against the document, which only names their media types.
func get(hs *harness, method, path string) reply {
	rec := httptest.NewRecorder()
	hs.h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return reply{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
}

// TestServesTheConsole: /admin/ answers the console's page and every file it names, with their
// types, never cached unasked (their names do not change between builds).
func TestServesTheConsole(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	index, err := fs.ReadFile(console.Files, "index.html")
	require.NoError(t, err)
	for _, path := range []string{"/admin/", "/admin", "/admin/index.html", "/admin/bookings"} {
		r := get(hs, http.MethodGet, path).expect(t, http.StatusOK)
		require.Equal(t, string(index), string(r.Body), path)
		require.Contains(t, r.Header.Get("Content-Type"), "text/html", path)
		require.Equal(t, "no-cache", r.Header.Get("Cache-Control"), path)
	}
	files := regexp.MustCompile(`(?:src|href)="/admin/([^"]+)"`).FindAllStringSubmatch(string(index), -1)
	for _, m := range files {
		r := get(hs, http.MethodGet, "/admin/"+m[1]).expect(t, http.StatusOK)
		want, err := fs.ReadFile(console.Files, m[1])
		require.NoError(t, err)
		require.Equal(t, string(want), string(r.Body), m[1])
		require.Equal(t, "no-cache", r.Header.Get("Cache-Control"), m[1])
	}
	r := get(hs, http.MethodGet, "/admin/missing.js").expect(t, http.StatusNotFound)
	require.Equal(t, "not_found", r.errorCode())
	get(hs, http.MethodGet, "/admin/../openapi.json").expect(t, http.StatusNotFound)
	// The API's admin routes are not the console's files.
	hs.do(http.MethodGet, "/api/v1/admin/bookings", "", nil).expect(t, http.StatusUnauthorized)
}
