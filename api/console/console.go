// Package console holds the operator console (docs/API.md "The operator console"): plain HTML, CSS
// and JavaScript with no build step, embedded in the binary and served at /admin/. It runs in the
// browser on the REST API alone — every action it offers is a route of openapi.json, called with
// the operator's token — so it owns no rule of the booking life. It imports nothing of slotwheel's.
package console

import (
	"embed"
	"io/fs"
)

//go:embed all:static
var static embed.FS

// Files is the console: index.html at its root, the script, styles and messages beside it.
var Files fs.FS = mustSub(static, "static")

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // dir is a constant that go:embed has checked
	}
	return sub
}
