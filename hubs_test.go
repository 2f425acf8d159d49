package main

import (
	"fmt"
	"go/ast"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/tools/go/packages"
)

// maxUsers is how many other files of its package one file may be used by. A file that every other
// file needs (a shared struct every service embeds, an error helper every handler calls) is where a
// package grows back into one room: each new feature touches it, and what a part really depends on
// can no longer be read from the part. Shared plumbing goes to a package of its own instead, and a
// service names what it uses beside its methods.
const maxUsers = 8

// hubExempt are the packages whose files may be used more widely: the domain core is meant to be
// read by every rule's caller.
var hubExempt = []string{"github.com/slotwheel/slotwheel/engine/booking"}

// TestNoHubFiles holds every package to maxUsers: a file counts as used by another file of its
// package when that file names a type, function, method, field, constant or variable it declares.
// Test files are left out, as they are of the layout.
func TestNoHubFiles(t *testing.T) {
	t.Parallel()
	pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax |
		packages.NeedTypes | packages.NeedTypesInfo}, "./...")
	require.NoError(t, err)
	var hubs []string
	for _, p := range pkgs {
		require.Empty(t, p.Errors, "package %s does not load", p.PkgPath)
		if slices.Contains(hubExempt, p.PkgPath) {
			continue
		}
		for file, users := range fileUsers(p) {
			if len(users) > maxUsers {
				hubs = append(hubs, fmt.Sprintf("%s/%s is used by %d files: %s", p.PkgPath, filepath.Base(file),
					len(users), strings.Join(slices.Sorted(maps.Keys(users)), " ")))
			}
		}
	}
	slices.Sort(hubs)
	require.Empty(t, hubs, "files used by more than %d other files of their package", maxUsers)
	require.Greater(t, len(pkgs), 30, "the pattern reached the whole module")
}

// fileUsers maps each file of p to the other files of p that use something it declares.
func fileUsers(p *packages.Package) map[string]map[string]bool {
	users := map[string]map[string]bool{}
	for _, f := range p.Syntax {
		user := filepath.Base(p.Fset.Position(f.Pos()).Filename)
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			obj := p.TypesInfo.Uses[id]
			if obj == nil || obj.Pkg() != p.Types || !obj.Pos().IsValid() {
				return true
			}
			decl := p.Fset.Position(obj.Pos()).Filename
			if filepath.Base(decl) == user {
				return true
			}
			if users[decl] == nil {
				users[decl] = map[string]bool{}
			}
			users[decl][user] = true
			return true
		})
	}
	return users
}
