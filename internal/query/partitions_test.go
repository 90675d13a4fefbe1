package query

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
)

// TestDropPartitionGivesUpWhenBusy: while a transaction holds an expired
// partition, a drop waits for its lock no longer than PartitionLockWait at a
// time (it would queue every later user of the partition behind it), gives
// up with ErrPartitionBusy after PartitionLockTries, as does FinishDetaches
// on the detach it left pending, and the next try, once the transaction
// ended, finishes the detach and drops it.
func TestDropPartitionGivesUpWhenBusy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*PartitionLockTries*(PartitionLockWait+PartitionLockPause))
	defer cancel()
	pool := pgtest.New(t)
	if err := DayPartitions(ctx, pool, 3); err != nil {
		t.Fatal(err)
	}
	expired, err := ExpiredPartitions(ctx, pool, 48*time.Hour)
	if err != nil || len(expired) == 0 {
		t.Fatalf("no expired partition to drop: %v %v", expired, err)
	}
	p := expired[0]
	old, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Rollback(ctx)
	if _, err := old.Exec(ctx, `SELECT count(*) FROM `+pgx.Identifier{"effectd", p.Name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if err := DropPartition(ctx, pool, p, 48*time.Hour); !errors.Is(err, ErrPartitionBusy) {
		t.Fatalf("drop of %s while a transaction holds it: %v, want ErrPartitionBusy", p.Name, err)
	}
	// the detach it began is left pending; finishing it waits no longer
	if err := FinishDetaches(ctx, pool); !errors.Is(err, ErrPartitionBusy) {
		t.Fatalf("finishing the detach of %s while a transaction holds it: %v, want ErrPartitionBusy", p.Name, err)
	}
	if err := old.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := DropPartition(ctx, pool, p, 48*time.Hour); err != nil {
		t.Fatalf("drop of %s at the next try: %v", p.Name, err)
	}
	var left bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, "effectd."+p.Name).Scan(&left); err != nil || left {
		t.Fatalf("%s still there (%v)", p.Name, err)
	}
}

// TestPartitionHeldReadsIndexes: on one PostgreSQL, whether an expired
// intents partition must stay is read from its partial indexes, the recent
// changes per channel from intents_prunable, never by reading the partition
// whole (partition_held.sql, written without a LATERAL join for Citus).
func TestPartitionHeldReadsIndexes(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.New(t)
	if err := AddChannels(ctx, pool, map[string]string{"bench": "webhook", "pay": "stripe", "sms": "twilio"}); err != nil {
		t.Fatal(err)
	}
	if err := DayPartitions(ctx, pool, 15); err != nil {
		t.Fatal(err)
	}
	if err := LoadHistory(ctx, pool, History{N: 30_000, Final: 30_000}); err != nil {
		t.Fatal(err)
	}
	if err := VacuumHistory(ctx, pool); err != nil {
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
		if n, err := PartitionRows(ctx, pool, p.Name); err == nil && n > most && p.Parent == "intents" {
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

// TestFinishDetachesAttachesUndecided: an intents partition that a drop
// detached and stopped at (a crash) before deciding on it holds a PENDING
// row no one can reach; FinishDetaches attaches it again, and the row is
// read through intents.
func TestFinishDetachesAttachesUndecided(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.New(t)
	if err := DayPartitions(ctx, pool, 3); err != nil {
		t.Fatal(err)
	}
	name := "intents_p" + time.Now().UTC().AddDate(0, 0, -2).Format("20060102")
	fixture.AddChannel(t, pool, "c", "webhook")
	at := fixture.Day(-2).Add(time.Hour)
	fixture.Intent(t, pool, fixture.Event("pending-2"), fixture.Channel("c"), fixture.CreatedAt(at), fixture.UpdatedAt(at))
	for _, q := range []string{
		`ALTER TABLE effectd.intents DETACH PARTITION effectd.` + name + ` CONCURRENTLY`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := FinishDetaches(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE event_id = 'pending-2'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the PENDING row of %s read through intents: %d, %v; want 1", name, n, err)
	}
}
