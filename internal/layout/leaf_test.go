package layout

import (
	"go/build"
	"path/filepath"
	"testing"
)

// TestSharedTypesImportOnlyTheStandardLibrary: effectdtype, the types every
// layer shares, is a leaf: its non-test files import only the standard
// library, so that whatever uses it pulls in nothing else.
func TestSharedTypesImportOnlyTheStandardLibrary(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join(root, "effectdtype"))
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := build.ImportDir(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkg.GoFiles) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	for _, path := range pkg.Imports {
		imp, err := build.Import(path, dir, build.FindOnly)
		if err != nil {
			t.Errorf("effectdtype imports %s, which is not found: %v", path, err)
			continue
		}
		if !imp.Goroot {
			t.Errorf("effectdtype imports %s (%v), which is not in the standard library: the shared types' leaf must import nothing else; keep the behaviour that needs it in another package and name the type there by an alias", path, pkg.ImportPos[path][0])
		}
	}
}
