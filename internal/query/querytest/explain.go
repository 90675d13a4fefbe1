package querytest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/pgtest"
)

// Explain runs setup, then EXPLAIN of sql with args, in a transaction it rolls
// back, and returns the plan.
func Explain(t *testing.T, setup []string, sql string, args ...any) string {
	t.Helper()
	return ExplainSeeded(t, func(pgx.Tx) {}, setup, sql, args...)
}

// ExplainSeeded is Explain with the rows seed makes (internal/fixture) in the
// transaction before setup runs.
func ExplainSeeded(t *testing.T, seed func(pgx.Tx), setup []string, sql string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	tx, err := pgtest.New(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	seed(tx)
	for _, s := range setup {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatalf("%.60s: %v", s, err)
		}
	}
	return pgtest.Plan(t, tx, "EXPLAIN "+sql, args...)
}
