package api

import (
	"bytes"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/api/console"
	"github.com/slotwheel/slotwheel/api/h5app"
	"github.com/slotwheel/slotwheel/api/internal/answer"
)

// serveApp serves a file of the H5 build (docs/API.md: at /app/); GET /app answers index.html too,
// since the build names its files by absolute paths under /app/. The app routes by the URL's hash, so any other path
// without a file extension is a deep link typed by hand and gets index.html; a missing asset is
// a 404 with the error body rather than an HTML page that a browser would try to run.
func serveApp(out answer.Failer) gin.HandlerFunc { return serveFiles(h5app.Files, true, out) }

// serveConsole serves a file of the operator console (docs/API.md: at /admin/), as serveApp does
// the app's. Its files keep their names from one build to the next, so none is cached unasked.
func serveConsole(out answer.Failer) gin.HandlerFunc { return serveFiles(console.Files, false, out) }

// serveFiles answers the file of files the path names; hashed says whether every file but
// index.html carries its content hash in its name, and so may be cached for good.
func serveFiles(files fs.FS, hashed bool, out answer.Failer) gin.HandlerFunc {
	return func(c *gin.Context) {
		name := strings.TrimPrefix(path.Clean("/"+c.Param("path")), "/")
		if name == "" {
			name = "index.html"
		}
		if st, err := fs.Stat(files, name); err != nil || st.IsDir() {
			if path.Ext(name) != "" {
				out.Fail(c, answer.ErrNotFound)
				return
			}
			name = "index.html"
		}
		if name == "index.html" || !hashed {
			// index.html names a new build's hashed files: always asked again.
			c.Header("Cache-Control", "no-cache")
		} else {
			// Every other file's name carries its content hash.
			c.Header("Cache-Control", "public, max-age=31536000, immutable")
		}
		body, err := fs.ReadFile(files, name)
		if err != nil {
			out.Fail(c, err)
			return
		}
		if t := mime.TypeByExtension(path.Ext(name)); t != "" {
			c.Header("Content-Type", t)
		}
		// ServeContent, not http.FileServer: the latter redirects index.html to its directory.
		http.ServeContent(c.Writer, c.Request, name, time.Time{}, bytes.NewReader(body))
	}
}
