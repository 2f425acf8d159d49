package api

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/api/internal/answer"
)

// TestCatalogListsEveryCode keeps the error codes in one home. It reads the module's Go sources for
// every code the server can answer with, and requires that the message catalog (answer.Catalog) has
// each of them in every language, has nothing else, and that openapi.json's Error.code enum is
// exactly the catalog's codes. A new code, in the engine or here, therefore fails this test until it
// has its messages and is in the contract.
func TestCatalogListsEveryCode(t *testing.T) {
	t.Parallel()
	found, unresolved := codesInSources(t, moduleRoot(t))
	require.Empty(t, unresolved, "error codes this test cannot read; give them a literal or teach codesInSources the new shape")
	require.Greater(t, len(found), 50, "the scan found too few codes; has the error machinery moved?")

	var missing []string
	for _, code := range sortedKeys(found) {
		for _, lang := range []string{answer.LangEN, answer.LangZH} {
			if answer.Catalog[lang][code] == "" {
				missing = append(missing, fmt.Sprintf("%s has no %s message (made at %s)", code, lang, found[code][0]))
			}
		}
	}
	require.Empty(t, missing, "add the messages to Catalog in api/internal/answer/messages.go")

	require.Equal(t, sortedKeys(answer.Catalog[answer.LangEN]), sortedKeys(answer.Catalog[answer.LangZH]), "the languages cover different codes")
	for code := range answer.Catalog[answer.LangEN] {
		require.Contains(t, found, code, "catalog has %s, which no source makes any more; remove it (and from openapi.json)", code)
	}

	var raw struct {
		Components struct {
			Schemas struct {
				Error struct {
					Properties struct {
						Error struct {
							Properties struct {
								Code struct {
									Enum []string `json:"enum"`
								} `json:"code"`
							} `json:"properties"`
						} `json:"error"`
					} `json:"properties"`
				} `json:"Error"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(openAPIDoc, &raw))
	require.Equal(t, sortedKeys(answer.Catalog[answer.LangEN]), raw.Components.Schemas.Error.Properties.Error.Properties.Code.Enum,
		"openapi.json's components.schemas.Error.properties.error.properties.code.enum must list the catalog's codes, sorted")
}

// TestCodeScannerSeesEveryShape guards the scanner itself: each way of making a code that the
// sources use today is found, so that a refactor of the scanner cannot quietly find nothing.
func TestCodeScannerSeesEveryShape(t *testing.T) {
	t.Parallel()
	found, _ := codesInSources(t, moduleRoot(t))
	for code, shape := range map[string]string{
		"slot_full":              "a sentinel &Error{Code: ...} in engine/booking",
		"idempotency_key_reused": "a &booking.Error{Code: ...} in engine/idem",
		"invalid_timezone":       "booking.Invalid(\"...\", ...)",
		"unknown_venue":          "a helper that passes its code parameter on (engine's unknown)",
		"invalid_name":           "\"invalid_\"+field, with field given by the caller of CheckName",
		"invalid_category":       "\"invalid_\"+field through CheckOptionalText",
		"invalid_capacity":       "the limits table, read through l.code",
		"invalid_number":         "a function whose result is the code (booking.CodeFor)",
		"not_found":              "answer.NewError(status, \"...\", ...)",
		"invalid_id":             "answer.BadRequest(\"...\", ...)",
		"invalid_role":           "answer.Unprocessable(\"...\", ...)",
		"missing_field":          "request.Missing(field), through answer.BadRequest",
	} {
		require.Contains(t, found, code, "the scanner misses %s", shape)
	}
	// The API's sentinels, declared at package level (in package answer and beside their routes).
	for _, e := range []*answer.Error{answer.ErrNotFound, answer.ErrMethodNotAllowed, answer.ErrUnauthorized, answer.ErrForbidden, answer.ErrBodyTooLarge,
		errWechatNotConfigured, errWechatLoginFailed, errWechatUnavailable, errBadSignature, errStaleSignature,
		errInvalidHoldID, answer.ErrInvalidIdempotency, answer.ErrInternal, answer.ErrBackendUnavailable} {
		require.Contains(t, found, e.Code, "the scanner misses the API's %s", e.Code)
	}
}

// moduleRoot is the directory of go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test")
		dir = parent
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// The shapes that carry an error code to a client:
//
//   - a composite literal of an error type with a Code field: booking.Error (also spelled Error inside
//     engine/booking and engine.Error outside it) and the API's answer.Error;
//   - a call of a constructor: a function that puts one of its parameters, as is or after a literal
//     prefix ("invalid_"+field), into such a literal or into another constructor's code argument.
//     Constructors are found, not listed: booking.Invalid, answer.NewError, answer.BadRequest, the
//     engine's unknown, booking.CheckName, ...
//
// A code expression is resolved when it is a string literal, a constructor's parameter, a field
// selector x.code whose struct is filled with literals (booking's limits table), or a call of a
// function whose results resolve (booking.CodeFor). Copies of an existing error's Code (x.Code) add
// nothing. Anything else is reported as unresolved, so that a new shape fails the test instead of
// hiding its codes.

// errorTypes are the error types whose Code field is a client-facing code, by package name.
var errorTypes = map[string]bool{
	"booking.Error": true, "engine.Error": true,
	"booking:Error": true, // Error written inside package booking
	"answer:Error":  true,
}

// ctor says which argument of a constructor is the code, and the literal prefix put before it.
type ctor struct {
	arg    int
	prefix string
}

type codeScan struct {
	fset  *token.FileSet
	files []*ast.File
	funcs map[string][]*ast.FuncDecl // by name (methods included)
	// fieldValues are the string literals given to struct fields named "code", by field name and
	// struct: "code" -> the literals of every positional or keyed literal of a struct with that field.
	fieldValues map[string][]string
	ctors       map[string]ctor
	found       map[string][]string // code -> where it is made
	unresolved  []string
}

// codesInSources scans every non-test Go file of the module (outside node_modules, testdata and
// hidden directories).
func codesInSources(t *testing.T, root string) (found map[string][]string, unresolved []string) {
	t.Helper()
	s := &codeScan{fset: token.NewFileSet(), funcs: map[string][]*ast.FuncDecl{}, fieldValues: map[string][]string{},
		ctors: map[string]ctor{}}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(s.fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		s.files = append(s.files, f)
		return nil
	})
	require.NoError(t, err)

	for _, f := range s.files {
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok {
				s.funcs[fd.Name.Name] = append(s.funcs[fd.Name.Name], fd)
			}
		}
	}
	s.collectCodeFields()

	// Constructors are discovered from the literals inward, so run until no new one appears; the last
	// pass collects the codes.
	for {
		n := len(s.ctors)
		s.found, s.unresolved = map[string][]string{}, nil
		s.walk()
		if len(s.ctors) == n {
			break
		}
	}
	return s.found, s.unresolved
}

// collectCodeFields records the literals of struct fields named "code" (lower case: a table's field,
// such as booking's limits), for selectors x.code.
func (s *codeScan) collectCodeFields() {
	structs := map[string]int{} // struct type name -> index of its code field
	for _, f := range s.files {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			i := 0
			for _, field := range st.Fields.List {
				for _, name := range field.Names {
					if name.Name == "code" {
						structs[ts.Name.Name] = i
					}
					i++
				}
				if len(field.Names) == 0 {
					i++
				}
			}
			return true
		})
	}
	for _, f := range s.files {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			// The element type, when the elements' own literals leave it out: map[K]T{k: {...}}, []T{{...}}.
			var elem ast.Expr
			switch t := lit.Type.(type) {
			case *ast.MapType:
				elem = t.Value
			case *ast.ArrayType:
				elem = t.Elt
			}
			for _, e := range lit.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					e = kv.Value
				}
				if inner, ok := e.(*ast.CompositeLit); ok && inner.Type == nil && elem != nil {
					s.recordCodeField(structs, elem, inner)
				}
			}
			if lit.Type != nil {
				s.recordCodeField(structs, lit.Type, lit)
			}
			return true
		})
	}
}

func (s *codeScan) recordCodeField(structs map[string]int, typ ast.Expr, lit *ast.CompositeLit) {
	name, ok := typ.(*ast.Ident)
	if !ok {
		return
	}
	idx, ok := structs[name.Name]
	if !ok {
		return
	}
	for i, e := range lit.Elts {
		if kv, ok := e.(*ast.KeyValueExpr); ok {
			if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "code" {
				if v, ok := stringLit(kv.Value); ok {
					s.fieldValues["code"] = append(s.fieldValues["code"], v+"\x00"+s.fset.Position(kv.Pos()).String())
				}
			}
			continue
		}
		if i == idx {
			if v, ok := stringLit(e); ok {
				s.fieldValues["code"] = append(s.fieldValues["code"], v+"\x00"+s.fset.Position(e.Pos()).String())
			}
		}
	}
}

// walk visits every code sink of every function and of package-level declarations.
func (s *codeScan) walk() {
	for _, f := range s.files {
		pkg := f.Name.Name
		for _, decl := range f.Decls {
			fd, _ := decl.(*ast.FuncDecl)
			ast.Inspect(decl, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CompositeLit:
					if !errorTypes[typeName(pkg, n.Type)] {
						return true
					}
					for _, e := range n.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Code" {
								s.sink(kv.Value, fd, "")
							}
						}
					}
				case *ast.CallExpr:
					c, ok := s.ctors[calleeName(n.Fun)]
					if ok && c.arg < len(n.Args) {
						s.sink(n.Args[c.arg], fd, c.prefix)
					}
				}
				return true
			})
		}
	}
}

// sink resolves the code expression e, met inside fd (nil at package level), with prefix before it.
func (s *codeScan) sink(e ast.Expr, fd *ast.FuncDecl, prefix string) {
	s.resolve(e, fd, prefix, map[*ast.FuncDecl]bool{})
}

func (s *codeScan) resolve(e ast.Expr, fd *ast.FuncDecl, prefix string, seen map[*ast.FuncDecl]bool) {
	where := s.fset.Position(e.Pos()).String()
	if v, ok := stringLit(e); ok {
		s.found[prefix+v] = append(s.found[prefix+v], where)
		return
	}
	switch x := e.(type) {
	case *ast.ParenExpr:
		s.resolve(x.X, fd, prefix, seen)
		return
	case *ast.Ident:
		if i := paramIndex(fd, x.Name); i >= 0 {
			s.ctors[fd.Name.Name] = ctor{arg: i, prefix: prefix}
			return
		}
	case *ast.BinaryExpr:
		if x.Op == token.ADD {
			if p, ok := stringLit(x.X); ok {
				s.resolve(x.Y, fd, prefix+p, seen)
				return
			}
		}
	case *ast.SelectorExpr:
		switch x.Sel.Name {
		case "Code":
			return // a copy of an error's code: that error's literal is a sink of its own
		case "code":
			if vals := s.fieldValues["code"]; len(vals) > 0 {
				for _, v := range vals {
					code, at, _ := strings.Cut(v, "\x00")
					s.found[prefix+code] = append(s.found[prefix+code], at)
				}
				return
			}
		}
	case *ast.CallExpr:
		if callees := s.funcs[calleeName(x.Fun)]; len(callees) > 0 {
			for _, callee := range callees {
				if seen[callee] || callee.Body == nil {
					continue
				}
				seen[callee] = true
				ast.Inspect(callee.Body, func(n ast.Node) bool {
					if _, ok := n.(*ast.FuncLit); ok {
						return false
					}
					if ret, ok := n.(*ast.ReturnStmt); ok && len(ret.Results) > 0 {
						s.resolve(ret.Results[0], callee, prefix, seen)
					}
					return true
				})
			}
			return
		}
	}
	s.unresolved = append(s.unresolved, where)
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	v, err := strconv.Unquote(lit.Value)
	return v, err == nil
}

// typeName names the type of a composite literal as errorTypes does ("booking.Error", "answer:Error").
func typeName(pkg string, e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return pkg + ":" + t.Name
	case *ast.SelectorExpr:
		if x, ok := t.X.(*ast.Ident); ok {
			return x.Name + "." + t.Sel.Name
		}
	}
	return ""
}

// calleeName is the name of a called function or method: Invalid for booking.Invalid, Fail for rt.Fail.
func calleeName(e ast.Expr) string {
	switch f := e.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// paramIndex is the position of fd's parameter name, -1 when it is none.
func paramIndex(fd *ast.FuncDecl, name string) int {
	if fd == nil {
		return -1
	}
	i := 0
	for _, field := range fd.Type.Params.List {
		for _, n := range field.Names {
			if n.Name == name {
				return i
			}
			i++
		}
		if len(field.Names) == 0 {
			i++
		}
	}
	return -1
}
