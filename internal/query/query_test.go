package query

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSQLFiles: every .sql file here says what it does in a leading comment
// and is embedded by a Go file of the package; no Go file embeds a missing one.
func TestSQLFiles(t *testing.T) {
	sqls, err := filepath.Glob("*.sql")
	if err != nil || len(sqls) == 0 {
		t.Fatalf("no .sql files: %v", err)
	}
	gos, _ := filepath.Glob("*.go")
	embedded := map[string]bool{}
	for _, g := range gos {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^\s*//go:embed (\S+\.sql)$`).FindAllStringSubmatch(string(b), -1) {
			embedded[m[1]] = true
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
}

// TestIntentColumns: each statement that returns whole intents spells out
// the select list of intent_columns.sql, which scanIntent reads.
func TestIntentColumns(t *testing.T) {
	cols := body(t, "intent_columns.sql")
	for _, f := range []string{"select_intent.sql", "operate.sql", "list_intents.sql", "bulk_sample.sql",
		"operate_bucket.sql", "intents_lock_bucket.sql", "operate_bulk_bucket.sql"} {
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
