package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// root is the module's directory, two levels up from this package.
const root = "../.."

// maxLines is the longest a function may be outside tests.
const maxLines = 80

// sources calls f with every non-test Go file of the module and its parse.
func sources(t *testing.T, f func(path string, file *ast.File, fset *token.FileSet)) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		f(filepath.ToSlash(rel), file, fset)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFunctionsShort: no function or method outside tests is over 80 lines.
func TestFunctionsShort(t *testing.T) {
	n := 0
	sources(t, func(path string, file *ast.File, fset *token.FileSet) {
		for _, d := range file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n++
			if lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; lines > maxLines {
				t.Errorf("%s: %s is %d lines, more than %d: split it where its concerns split", path, fd.Name.Name, lines, maxLines)
			}
		}
	})
	if n < 500 {
		t.Fatalf("only %d functions found: the walk missed the module", n)
	}
}

// TestDataLayerConcernsApart: each package of the data layer under
// internal/query (intentdb, readdb, ...) imports the base, internal/query, and
// no other package of the data layer; the base imports none of them. A piece
// two concerns need belongs in the base.
func TestDataLayerConcernsApart(t *testing.T) {
	const base = "github.com/effectd/effectd/internal/query"
	concerns := map[string]bool{}
	sources(t, func(path string, file *ast.File, _ *token.FileSet) {
		if !strings.HasPrefix(path, "internal/query/") {
			return
		}
		own := base + strings.TrimPrefix(filepath.Dir(path), "internal/query")
		concerns[own] = true
		for _, imp := range file.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, base+"/") && p != own {
				t.Errorf("%s imports %s: a piece two concerns need belongs in %s", path, p, base)
			}
		}
	})
	if len(concerns) < 5 {
		t.Fatalf("only %d packages found under internal/query", len(concerns))
	}
}

// TestAPIStaysAboveTheDataLayer: nothing under api/ imports internal/query
// (or a package of it) or internal/storage; the admin API, its client, the
// console and the ingress go through the operator service and the dispatcher.
func TestAPIStaysAboveTheDataLayer(t *testing.T) {
	below := []string{"github.com/effectd/effectd/internal/query", "github.com/effectd/effectd/internal/storage"}
	seen := 0
	sources(t, func(path string, file *ast.File, _ *token.FileSet) {
		if !strings.HasPrefix(path, "api/") {
			return
		}
		seen++
		for _, imp := range file.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, b := range below {
				if p == b || strings.HasPrefix(p, b+"/") {
					t.Errorf("%s imports %s", path, p)
				}
			}
		}
	})
	if seen == 0 {
		t.Fatal("no file under api/ found")
	}
}
