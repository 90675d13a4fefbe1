package query

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	if err := DropPartition(ctx, pool, p); !errors.Is(err, ErrPartitionBusy) {
		t.Fatalf("drop of %s while a transaction holds it: %v, want ErrPartitionBusy", p.Name, err)
	}
	// the detach it began is left pending; finishing it waits no longer
	if err := FinishDetaches(ctx, pool); !errors.Is(err, ErrPartitionBusy) {
		t.Fatalf("finishing the detach of %s while a transaction holds it: %v, want ErrPartitionBusy", p.Name, err)
	}
	if err := old.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := DropPartition(ctx, pool, p); err != nil {
		t.Fatalf("drop of %s at the next try: %v", p.Name, err)
	}
	var left bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, "effectd."+p.Name).Scan(&left); err != nil || left {
		t.Fatalf("%s still there (%v)", p.Name, err)
	}
}
