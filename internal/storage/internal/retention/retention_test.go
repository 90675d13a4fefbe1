package retention

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/internal/query/retentiondb"
)

// TestDropPartitionGivesUpWhenBusy: while a transaction holds an expired
// partition, a drop waits for its lock no longer than LockWait at a time (it
// would queue every later user of the partition behind it), gives up with
// retentiondb.ErrPartitionBusy after LockTries, as does FinishDetaches on the
// detach it left pending, and the next try, once the transaction ended,
// finishes the detach and drops it.
func TestDropPartitionGivesUpWhenBusy(t *testing.T) {
	pool := pgtest.New(t) // before the clock starts: a first test starts PostgreSQL
	ctx, cancel := context.WithTimeout(context.Background(), 5*LockTries*(LockWait+LockPause))
	defer cancel()
	r := New(pool)
	if err := harnessdb.DayPartitions(ctx, pool, 3); err != nil {
		t.Fatal(err)
	}
	expired, err := retentiondb.ExpiredPartitions(ctx, pool, 48*time.Hour)
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
	if err := r.dropPartition(ctx, p, 48*time.Hour); !errors.Is(err, retentiondb.ErrPartitionBusy) {
		t.Fatalf("drop of %s while a transaction holds it: %v, want ErrPartitionBusy", p.Name, err)
	}
	// the detach it began is left pending; finishing it waits no longer
	if err := r.FinishDetaches(ctx); !errors.Is(err, retentiondb.ErrPartitionBusy) {
		t.Fatalf("finishing the detach of %s while a transaction holds it: %v, want ErrPartitionBusy", p.Name, err)
	}
	if err := old.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.dropPartition(ctx, p, 48*time.Hour); err != nil {
		t.Fatalf("drop of %s at the next try: %v", p.Name, err)
	}
	var left bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, "effectd."+p.Name).Scan(&left); err != nil || left {
		t.Fatalf("%s still there (%v)", p.Name, err)
	}
}

// TestFinishDetachesAttachesUndecided: an intents partition that a drop
// detached and stopped at (a crash) before deciding on it holds a PENDING
// row no one can reach; FinishDetaches attaches it again, and the row is
// read through intents.
func TestFinishDetachesAttachesUndecided(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.New(t)
	if err := harnessdb.DayPartitions(ctx, pool, 3); err != nil {
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
	if err := New(pool).FinishDetaches(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE event_id = 'pending-2'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the PENDING row of %s read through intents: %d, %v; want 1", name, n, err)
	}
}
