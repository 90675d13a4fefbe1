package retentiondb

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/internal/query/harnessdb"
)

// TestPartitionHeldReadsIndexes: on one PostgreSQL, whether an expired
// intents partition must stay is read from its partial indexes, the recent
// changes per channel from intents_prunable, never by reading the partition
// whole (partition_held.sql, written without a LATERAL join for Citus).
func TestPartitionHeldReadsIndexes(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.New(t)
	if err := harnessdb.AddChannels(ctx, pool, map[string]string{"bench": "webhook", "pay": "stripe", "sms": "twilio"}); err != nil {
		t.Fatal(err)
	}
	if err := harnessdb.DayPartitions(ctx, pool, 15); err != nil {
		t.Fatal(err)
	}
	if err := harnessdb.LoadHistory(ctx, pool, harnessdb.History{N: 30_000, Final: 30_000}); err != nil {
		t.Fatal(err)
	}
	if err := harnessdb.VacuumHistory(ctx, pool); err != nil {
		t.Fatal(err)
	}
	expired, err := ExpiredPartitions(ctx, pool, 10*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// the fullest (the first day holds as few rows as the hour of the run
	// leaves it, and a partition of a few pages may rightly be read whole)
	var name string
	var most int64
	for _, p := range expired {
		if n, err := harnessdb.PartitionRows(ctx, pool, p.Name); err == nil && n > most && p.Parent == "intents" {
			name, most = p.Name, n
		}
	}
	if name == "" {
		t.Fatalf("no expired intents partition with rows among %v", expired)
	}
	sql := strings.ReplaceAll(partitionHeldSQL, "effectd.partition ", pgx.Identifier{"effectd", name}.Sanitize()+" ")
	plan := pgtest.Plan(t, pool, "EXPLAIN "+sql, "240 hours")
	if strings.Contains(plan, "Seq Scan on "+name) || !strings.Contains(plan, name+"_prunable") ||
		!strings.Contains(plan, "channel = ANY") {
		t.Errorf("partition_held.sql on %s reads the partition otherwise than by its indexes:\n%s", name, plan)
	}
	if held, err := PartitionHeld(ctx, pool, name, 10*24*time.Hour); err != nil || held {
		t.Errorf("PartitionHeld(%s) = %v, %v; want false: nothing in it is live or recent", name, held, err)
	}
}
