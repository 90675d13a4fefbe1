//go:build citus

package dispatcher_test

import (
	"context"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/query"
)

// TestCitusDropExpiredPartitions: on the distributed layout the pruner's own
// statements drop the expired day partitions of a loaded history on every
// shard (none of their shards is left on a worker) and keep the rest; and an
// expired partition holding a row changed within the horizon is held. Before
// partition_held.sql was written without a LATERAL join, Citus refused the
// check ("cannot push down this subquery") and nothing was ever dropped.
func TestCitusDropExpiredPartitions(t *testing.T) {
	pool := citusPool(t, 32)
	ctx := context.Background()
	if err := query.AddChannels(ctx, pool, map[string]string{"bench": "webhook", "pay": "stripe", "sms": "twilio"}); err != nil {
		t.Fatal(err)
	}
	if err := query.DayPartitions(ctx, pool, 15); err != nil {
		t.Fatal(err)
	}
	if err := query.LoadHistoryBuckets(ctx, pool, query.History{N: 3000, Final: 3000}, 32); err != nil {
		t.Fatal(err)
	}
	count := func(where string, args ...any) (n int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE `+where, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const day = 24 * time.Hour
	today := time.Now().UTC().Truncate(day)
	// the partitions that ended 13 days ago or before: the oldest two
	cut := today.Add(-13 * day)
	expired, total := count(`created_at < $1`, cut), count(`true`)
	if expired == 0 {
		t.Fatalf("no intent before %s: the load does not reach the oldest days", cut)
	}

	dropped, held, err := dispatcher.DropExpiredPartitions(ctx, pool, 13*day, nil)
	if err != nil {
		t.Fatalf("DropExpiredPartitions: %v", err)
	}
	var names []string
	intents := 0
	for _, p := range dropped {
		names = append(names, p.Name)
		if p.Parent == "intents" {
			intents++
		}
	}
	if intents != 2 || held != 0 {
		t.Errorf("dropped %v (%d of intents), held %d; want the two oldest intents partitions, none held", names, intents, held)
	}
	if left, err := query.ShardsLeft(ctx, pool, names); err != nil || left != 0 {
		t.Errorf("tables of the dropped partitions left on the workers: %d, %v; want 0", left, err)
	}
	if n := count(`true`); n != total-expired {
		t.Errorf("%d intents left, want %d (%d of %d were in the dropped days)", n, total-expired, expired, total)
	}

	// The next oldest partition, with one of its rows changed now, is held
	// at a horizon of 12 days.
	var bucket int
	var event string
	if err := pool.QueryRow(ctx, `SELECT bucket, event_id FROM effectd.intents WHERE created_at >= $1 AND created_at < $2 LIMIT 1`,
		cut, cut.Add(day)).Scan(&bucket, &event); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE effectd.intents SET updated_at = now() WHERE bucket = $1 AND event_id = $2`, bucket, event); err != nil {
		t.Fatal(err)
	}
	dropped, held, err = dispatcher.DropExpiredPartitions(ctx, pool, 12*day, nil)
	if err != nil {
		t.Fatalf("DropExpiredPartitions: %v", err)
	}
	for _, p := range dropped {
		if p.Parent == "intents" {
			t.Errorf("dropped %s, which holds a row changed now", p.Name)
		}
	}
	if held != 1 {
		t.Errorf("held %d partitions, want 1", held)
	}
}
