package layout

import (
	"go/ast"
	"go/token"
	"go/types"
	"path"
	"strconv"
	"strings"
	"testing"
)

// poolImport is the package whose Pool no exported function takes.
const poolImport = "github.com/jackc/pgx/v5/pgxpool"

// poolHelpers are the packages that exist to hand tests a database: their
// exported functions take and return pools, and only tests import them.
var poolHelpers = map[string]bool{
	"internal/pgtest":    true,
	"internal/localpg":   true,
	"internal/citustest": true,
}

// TestNoExportedFunctionTakesAPool: outside constructors, no exported function
// or method of a non-test file takes a *pgxpool.Pool. Whoever holds a pool
// is a value built once: a constructor is a top-level function named New, or
// New or Open followed by an upper-case letter, whose first result is a type
// declared in its own package (T or *T); it keeps the pool in what it returns.
// Anything else takes what it really uses: a pgx.Tx, a query.DB, or a small
// interface with the methods it calls. Unexported functions may take a pool,
// and so may the test helpers in poolHelpers.
func TestNoExportedFunctionTakesAPool(t *testing.T) {
	n := 0
	sources(t, func(file string, f *ast.File, _ *token.FileSet) {
		if poolHelpers[path.Dir(file)] {
			return
		}
		name := poolName(f)
		if name == "" {
			return
		}
		n++
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() || !takesPool(fd.Type.Params, name) || isConstructor(fd) {
				continue
			}
			t.Errorf("%s: %s takes a *pgxpool.Pool and is no constructor: make it a method of a value built once by a constructor that keeps the pool (New…), or have it take what it uses (a pgx.Tx, query.DB, or a small interface of the methods it calls)", file, funcName(fd))
		}
	})
	if n < 5 {
		t.Fatalf("only %d files import pgxpool: the walk missed the module", n)
	}
}

// poolName is the name under which f imports pgxpool, or "" if it does not.
func poolName(f *ast.File) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == poolImport {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return "pgxpool"
		}
	}
	return ""
}

// takesPool reports whether a parameter of params is a *pgxpool.Pool (or a
// pgxpool.Pool), pkg being the name pgxpool is imported under.
func takesPool(params *ast.FieldList, pkg string) bool {
	for _, p := range params.List {
		typ := p.Type
		if e, ok := typ.(*ast.Ellipsis); ok {
			typ = e.Elt
		}
		if s, ok := typ.(*ast.StarExpr); ok {
			typ = s.X
		}
		if sel, ok := typ.(*ast.SelectorExpr); ok && sel.Sel.Name == "Pool" {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == pkg {
				return true
			}
		}
	}
	return false
}

// isConstructor reports whether fd is a constructor: a function (not a
// method) named New, NewX or OpenX whose first result is T or *T with T an
// unqualified identifier other than a predeclared one (error, int, any…),
// that is, a type declared in fd's own package.
func isConstructor(fd *ast.FuncDecl) bool {
	if fd.Recv != nil || fd.Type.Results == nil || len(fd.Type.Results.List) == 0 {
		return false
	}
	n := fd.Name.Name
	named := n == "New"
	for _, prefix := range []string{"New", "Open"} {
		if rest, ok := strings.CutPrefix(n, prefix); ok && rest != "" && rest[0] >= 'A' && rest[0] <= 'Z' {
			named = true
		}
	}
	if !named {
		return false
	}
	typ := fd.Type.Results.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && types.Universe.Lookup(id.Name) == nil
}

// funcName is fd's name, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if ix, ok := typ.(*ast.IndexExpr); ok {
		typ = ix.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return "(" + id.Name + ")." + fd.Name.Name
	}
	return fd.Name.Name
}
