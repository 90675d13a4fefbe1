package layout

import (
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// handInsert is a hand-written INSERT into one of effectd's tables, in any
// case and across line breaks.
var handInsert = regexp.MustCompile(`(?is)\binsert\s+into\s+"?effectd"?\s*\.`)

// insertsAllowed are the Go files outside internal/fixture and migrations/
// that may hold a hand-written INSERT into effectd's tables, each because the
// INSERT is itself what its code is about.
var insertsAllowed = map[string]string{
	// the mutations quote the migrations' own statements to break them
	"cmd/mutate/mutations.go": "snippets of the migrations' SQL",
	// a role without the right must be refused the INSERT: the refusal is the test
	"cmd/effectd/access_e2e_test.go": "the payments role's refused INSERT",
	// poison rows on purpose, as enqueue now refuses them (TestAbusePoisonRows):
	// occurred_at and next_attempt_at of ±infinity or past year 9999, keys with
	// a control character or white space at an end
	"cmd/effectd/abuse_test.go": "poison rows",
	// the chaos checker's failover puts back the very rows it copied aside
	// (OVERRIDING SYSTEM VALUE SELECT * FROM the copy): a restore, not a fixture
	"cmd/effectd/internal/chaos/reuse.go": "a failover's restored rows",
}

// goFiles calls f with every Go file of the module (tests included), its
// path relative to the module's root and its text.
func goFiles(t *testing.T, f func(rel, text string)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		f(filepath.ToSlash(rel), string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRowsThroughTheFixtureFactory: no Go file outside internal/fixture and
// migrations/ writes a row into effectd's tables by a hand-written INSERT;
// tests make their rows with internal/fixture. The few files whose INSERT is
// the point are listed in insertsAllowed, and each must still hold one.
func TestRowsThroughTheFixtureFactory(t *testing.T) {
	seen, holding := 0, map[string]bool{}
	goFiles(t, func(rel, text string) {
		seen++
		if strings.HasPrefix(rel, "internal/fixture/") || strings.HasPrefix(rel, "migrations/") {
			return
		}
		if !handInsert.MatchString(text) {
			return
		}
		holding[rel] = true
		if _, ok := insertsAllowed[rel]; !ok {
			t.Errorf("%s: a hand-written INSERT into an effectd table; make the rows with internal/fixture (docs/testing.md, \"The fixture factory\")", rel)
		}
	})
	if seen < 300 {
		t.Fatalf("only %d Go files found: the walk missed the module", seen)
	}
	for _, rel := range slices.Sorted(maps.Keys(insertsAllowed)) {
		if !holding[rel] {
			t.Errorf("%s is allowed an INSERT but holds none: remove it from insertsAllowed", rel)
		}
	}
}

// TestTestDatabasesStopped: every package whose tests take a database from
// pgtest's shared server (pgtest.New, pgtest.URL) has a TestMain that calls
// pgtest.Main, which stops that server when the tests end; every package
// whose tests use citustest's shared cluster (citustest.Cluster,
// citustest.New) stops it too, by citustest.Main or, where pgtest.Main is the
// TestMain, by pgtest.AtExit(citustest.Stop). Without them each run of the
// package's tests leaves a PostgreSQL, or three, running.
func TestTestDatabasesStopped(t *testing.T) {
	usesPG, stopsPG := map[string]bool{}, map[string]bool{}
	usesCitus, stopsCitus := map[string]bool{}, map[string]bool{}
	goFiles(t, func(rel, text string) {
		if !strings.HasSuffix(rel, "_test.go") || strings.HasPrefix(rel, "internal/layout/") {
			return
		}
		dir := path.Dir(rel)
		if strings.Contains(text, "pgtest.New(") || strings.Contains(text, "pgtest.URL(") {
			usesPG[dir] = true
		}
		if strings.Contains(text, "pgtest.Main(m)") {
			stopsPG[dir] = true
		}
		if strings.Contains(text, "citustest.Cluster(") || strings.Contains(text, "citustest.New(") {
			usesCitus[dir] = true
		}
		if strings.Contains(text, "citustest.Main(m)") || strings.Contains(text, "pgtest.AtExit(citustest.Stop)") {
			stopsCitus[dir] = true
		}
	})
	if len(usesPG) == 0 || len(usesCitus) == 0 {
		t.Fatal("no package's tests use pgtest or citustest: the walk found nothing")
	}
	for dir := range usesPG {
		if !stopsPG[dir] {
			t.Errorf("%s: its tests use pgtest's server but no TestMain calls pgtest.Main (func TestMain(m *testing.M) { pgtest.Main(m) })", dir)
		}
	}
	for dir := range usesCitus {
		if !stopsCitus[dir] {
			t.Errorf("%s: its tests use citustest's cluster but nothing stops it (citustest.Main, or func init() { pgtest.AtExit(citustest.Stop) } beside pgtest.Main)", dir)
		}
	}
}
