package query

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSQLFiles: in each package of the data layer, every .sql file says what
// it does in a leading comment and is embedded by a Go file of its package;
// no Go file embeds a missing one.
func TestSQLFiles(t *testing.T) {
	dirs, err := filepath.Glob("*")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, d := range append(dirs, ".") {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			continue
		}
		total += sqlFiles(t, d)
	}
	if total == 0 {
		t.Fatal("no .sql files")
	}
}

// sqlFiles checks the .sql files of dir against the embeds of its Go files
// And returns how many there are.
func sqlFiles(t *testing.T, dir string) int {
	sqls, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	gos, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	embedded := map[string]bool{}
	for _, g := range gos {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^\s*//go:embed (\S+\.sql)$`).FindAllStringSubmatch(string(b), -1) {
			embedded[filepath.Join(dir, m[1])] = true
		}
	}
	for _, f := range sqls {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), "-- ") {
			t.Errorf("%s: no leading comment saying what it does", f)
		}
		if !embedded[f] && f != "intent_columns.sql" {
			t.Errorf("%s: not embedded by any Go file", f)
		}
		delete(embedded, f)
	}
	for f := range embedded {
		t.Errorf("%s: embedded but not in the package", f)
	}
	return len(sqls)
}

// TestIntentColumns: each statement that returns whole intents spells out
// the select list of intent_columns.sql, which ScanIntent reads.
func TestIntentColumns(t *testing.T) {
	cols := body(t, "intent_columns.sql")
	for _, f := range []string{"readdb/select_intent.sql", "intentdb/operate.sql", "readdb/list_intents.sql",
		"intentdb/bulk_sample.sql", "intentdb/operate_bucket.sql", "intentdb/intents_lock_bucket.sql", "intentdb/operate_bulk_bucket.sql"} {
		if !strings.Contains(body(t, f), cols) {
			t.Errorf("%s does not spell out the select list of intent_columns.sql:\n%s", f, cols)
		}
	}
}

// body returns file f without its comment lines, white space collapsed.
func body(t *testing.T, f string) string {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			lines = append(lines, l)
		}
	}
	return strings.Join(strings.Fields(strings.Join(lines, " ")), " ")
}
