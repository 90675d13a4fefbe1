package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocateRefusesAReplacedFunction: a snippet in a migration's function
// that a later migration defines again is reported, not mutated; the same
// snippet in the function in force, or outside any function, is found.
func TestLocateRefusesAReplacedFunction(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "migrations")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("001_a.up.sql", "CREATE TABLE t (n int);\nCREATE FUNCTION s.f(n int) RETURNS int AS $$ SELECT n + 1 $$;\nCREATE INDEX ON t (n);\n")
	write("002_b.up.sql", "CREATE OR REPLACE FUNCTION s.f(n int) RETURNS int AS $$ SELECT n + 2 $$;\n")

	if _, _, err := locate(root, mutation{file: "migrations/001_a.up.sql", from: "n + 1"}); err == nil || !strings.Contains(err.Error(), "002_b.up.sql defines again") {
		t.Errorf("a snippet of a replaced function: %v, want it refused naming 002_b.up.sql", err)
	}
	if f, _, err := locate(root, mutation{file: "migrations/*.up.sql", from: "n + 2"}); err != nil || filepath.Base(f) != "002_b.up.sql" {
		t.Errorf("the function in force: %s, %v", f, err)
	}
	if _, _, err := locate(root, mutation{file: "migrations/*.up.sql", from: "CREATE INDEX ON t (n)"}); err != nil {
		t.Errorf("a statement outside any function: %v", err)
	}
}
