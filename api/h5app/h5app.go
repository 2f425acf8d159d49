// Package h5app holds the H5 build of the reference booking mini-program (clients/miniprogram),
// committed with the source and embedded in the binary, so that `go run .` shows a booking app
// at /app/ with no Node.js installed. The files under dist/ are generated: rebuild them with
// `npm run build:app` in clients/miniprogram, never by hand (CI rebuilds and compares). It owns
// nothing else and imports nothing of slotwheel's.
package h5app

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// Files is the H5 build: index.html at its root, the scripts and styles it names beside it.
var Files fs.FS = mustSub(dist, "dist")

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // dir is a constant that go:embed has checked
	}
	return sub
}
