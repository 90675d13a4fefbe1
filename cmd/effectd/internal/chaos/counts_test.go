package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/internal/storage"
	"github.com/effectd/effectd/providers/sandbox"
)

// TestCheckerComparesCounts: the checker passes when the counts operators read
// equal the rows, and flags the channel and status where they do not.
func TestCheckerComparesCounts(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.New(t)
	fixture.AddChannel(t, pool, "hook", "webhook")
	fixture.Intents(t, pool, 5, func(n int) []fixture.IntentOption {
		status := "PENDING"
		if n <= 3 {
			status = "SENT"
		}
		return []fixture.IntentOption{fixture.Event(fmt.Sprintf("e%d", n)), fixture.Channel("hook"), fixture.Status(status),
			fixture.Attempts(0)}
	})
	judge := func() []Violation {
		c := newChecker(nil, nil, sandbox.Snapshot{}, nil, nil)
		if err := c.judgeCounts(ctx, storage.New(effectdtype.SingleNode, pool, storage.Leases{}), pool); err != nil {
			t.Fatal(err)
		}
		return c.report(nil).Violations
	}
	if v := judge(); len(v) != 0 {
		t.Fatalf("counts that agree with the rows flagged: %v", v)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM effectd.intent_count_deltas; DELETE FROM effectd.intent_counts`); err != nil {
		t.Fatal(err)
	}
	v := judge()
	if len(v) != 1 || v[0].Channel != "hook" || !strings.Contains(v[0].Rule, "the counts read 0 SENT, the rows 3") {
		t.Fatalf("counts that lost 3 SENT: %v", v)
	}
}
