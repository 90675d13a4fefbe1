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

// TestAPIStaysAboveTheDataLayer: nothing under api/ imports internal/query
// or internal/storage; the admin API, its client, the console and the
// ingress go through the operator service and the dispatcher.
func TestAPIStaysAboveTheDataLayer(t *testing.T) {
	below := map[string]bool{
		"github.com/effectd/effectd/internal/query":   true,
		"github.com/effectd/effectd/internal/storage": true,
	}
	seen := 0
	sources(t, func(path string, file *ast.File, _ *token.FileSet) {
		if !strings.HasPrefix(path, "api/") {
			return
		}
		seen++
		for _, imp := range file.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); below[p] {
				t.Errorf("%s imports %s", path, p)
			}
		}
	})
	if seen == 0 {
		t.Fatal("no file under api/ found")
	}
}
