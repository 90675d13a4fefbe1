package readdb

import (
	"context"
	"testing"
	"time"

	"github.com/effectd/effectd/internal/pgtest"
)

// TestSweepReadsItsWindow: the sweep's read of a channel's window touches a
// few pages of a table of 20,000 intents over 14 days, whether the window is
// recent or long before any intent: it reads the window through the id mark
// and the created_at summary, never the history.
func TestSweepReadsItsWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 20,000 intents")
	}
	pool := pgtest.New(t)
	ctx := context.Background()
	seedHistory(t, pool, 1, 20_000)
	var tablePages int64
	if err := pool.QueryRow(ctx, `SELECT sum(relpages)::bigint FROM pg_class WHERE oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'effectd.intents'::regclass)`).Scan(&tablePages); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, w := range []struct {
		name         string
		since, until time.Time
	}{
		{"the last 30 minutes", now.Add(-30 * time.Minute), now},
		{"a week 100 days ago", now.Add(-100 * 24 * time.Hour), now.Add(-93 * 24 * time.Hour)},
	} {
		var from int64
		if err := pool.QueryRow(ctx, idBeforeSQL, w.since).Scan(&from); err != nil {
			t.Fatal(err)
		}
		n, plan := buffers(t, pool, flatRead{name: "sweep: " + w.name, sql: sweepIntentsSQL, args: []any{"sms", w.since, w.until, 100_001, from}})
		t.Logf("sweep of %s: %d pages of a %d-page table", w.name, n, tablePages)
		if n > tablePages/4 {
			t.Errorf("sweep of %s touched %d pages of a %d-page table: it reads history\n%s", w.name, n, tablePages, compact(plan))
		}
	}
}
