//go:build citus

package dispatcher_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/internal/query/retentiondb"
	"github.com/effectd/effectd/internal/storage/citus"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/statemachine"
)

// TestCitusDropExpiredPartitions: on the distributed layout with day
// partitions (partition_days 1) the pruner's own
// statements drop the expired day partitions of a loaded history on every
// shard (none of their shards is left on a worker) and keep the rest; and an
// expired partition holding a row changed within the horizon is held. Before
// partition_held.sql was written without a LATERAL join, Citus refused the
// check ("cannot push down this subquery") and nothing was ever dropped.
func TestCitusDropExpiredPartitions(t *testing.T) {
	pool := loadedHistory(t, 1)
	ctx := context.Background()
	count := intentCounter(t, pool)
	const day = 24 * time.Hour
	today := time.Now().UTC().Truncate(day)
	// the partitions that ended 13 days ago or before: the oldest two
	cut := today.Add(-13 * day)
	expired, total := count(`created_at < $1`, cut), count(`true`)
	if expired == 0 {
		t.Fatalf("no intent before %s: the load does not reach the oldest days", cut)
	}

	dropped, held, err := citus.New(pool, 0, nil).DropExpiredPartitions(ctx, 13*day)
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
	if left, err := harnessdb.ShardsLeft(ctx, pool, names); err != nil || left != 0 {
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
	dropped, held, err = citus.New(pool, 0, nil).DropExpiredPartitions(ctx, 12*day)
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

// loadedHistory is a distributed database with partitions of days days, 3,000
// intents over the 15 days before today loaded into 32 buckets.
func loadedHistory(t *testing.T, days int) *pgxpool.Pool {
	t.Helper()
	pool := citusPoolDays(t, 32, days)
	ctx := context.Background()
	if err := harnessdb.AddChannels(ctx, pool, map[string]string{"bench": "webhook", "pay": "stripe", "sms": "twilio"}); err != nil {
		t.Fatal(err)
	}
	if err := harnessdb.DayPartitions(ctx, pool, 15); err != nil {
		t.Fatal(err)
	}
	if err := harnessdb.LoadHistoryBuckets(ctx, pool, harnessdb.History{N: 3000, Final: 3000}, 32); err != nil {
		t.Fatal(err)
	}
	return pool
}

// TestCitusDropExpiredWeeks: with partitions a week wide (the default), the
// 15 days of a loaded history are in at most 3 partitions of intents, and the
// pruner drops a week only once all of it has expired: at a horizon three
// days into the second week that holds rows, it drops the first on every
// shard and keeps the second, whose rows older than the horizon wait for it.
func TestCitusDropExpiredWeeks(t *testing.T) {
	pool := loadedHistory(t, 7)
	ctx := context.Background()
	count := intentCounter(t, pool)
	parts, err := retentiondb.ExpiredPartitions(ctx, pool, -30*24*time.Hour) // every partition, oldest first
	if err != nil {
		t.Fatal(err)
	}
	var ended, weeks []retentiondb.Partition
	for _, p := range parts {
		if p.Parent != "intents" || !p.Upper.Time.Before(time.Now()) {
			continue
		}
		ended = append(ended, p)
		if len(weeks) > 0 || count(`created_at >= $1 AND created_at < $2`, p.Lower.Time, p.Upper.Time) > 0 {
			weeks = append(weeks, p)
		}
	}
	if len(ended) < 2 || len(ended) > 3 || len(weeks) < 2 {
		t.Fatalf("the intents partitions ended before now: %+v, from the first with rows %+v; want the 15 days before today in 2 or 3, two with rows", ended, weeks)
	}
	first, second := weeks[0], weeks[1]
	if first.Upper.Time.Weekday() != time.Monday || second.Upper.Time.Sub(second.Lower.Time) != 7*24*time.Hour {
		t.Fatalf("first %s to %s, second %s to %s: not weeks", first.Lower.Time, first.Upper.Time, second.Lower.Time, second.Upper.Time)
	}
	cut := second.Lower.Time.Add(3 * 24 * time.Hour)
	horizon := time.Since(cut)
	inFirst, total := count(`created_at < $1`, first.Upper.Time), count(`true`)
	pastHorizon := count(`created_at < $1`, cut)
	if pastHorizon <= inFirst {
		t.Fatalf("%d intents in the first week, %d before %s: the second week holds none past the horizon", inFirst, pastHorizon, cut)
	}

	dropped, held, err := citus.New(pool, 0, nil).DropExpiredPartitions(ctx, horizon)
	if err != nil {
		t.Fatalf("DropExpiredPartitions: %v", err)
	}
	var names []string
	for _, p := range dropped {
		names = append(names, p.Name)
		if p.Parent == "intents" && p.Upper.Time.After(first.Upper.Time) {
			t.Errorf("dropped %s (to %s); want the weeks to %s only", p.Name, p.Upper.Time, first.Upper.Time)
		}
	}
	if len(names) == 0 || held != 0 {
		t.Fatalf("dropped %v, held %d; want the first week", names, held)
	}
	if left, err := harnessdb.ShardsLeft(ctx, pool, names); err != nil || left != 0 {
		t.Errorf("tables of the dropped partitions left on the workers: %d, %v; want 0", left, err)
	}
	if n := count(`true`); n != total-inFirst {
		t.Errorf("%d intents left, want %d: the second week's %d rows past the horizon stay with it", n, total-inFirst, pastHorizon-inFirst)
	}
}

// intentCounter counts the intents of pool that match a condition, failing t
// on an error.
func intentCounter(t *testing.T, pool *pgxpool.Pool) func(where string, args ...any) int64 {
	return func(where string, args ...any) (n int64) {
		t.Helper()
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM effectd.intents WHERE `+where, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// TestCitusPruneKeepsRowRequeuedBeforeDetach: in the distributed mode every
// expired partition is dropped one by one; an operator's requeue of a FAILED
// intent of the oldest partition, committed after the partition's first
// check and before its detach, keeps the partition on every shard: the check
// made again under the detach's lock, in the transaction that would drop it,
// finds the PENDING row and rolls the detach back.
func TestCitusPruneKeepsRowRequeuedBeforeDetach(t *testing.T) {
	pool := loadedHistory(t, 1)
	ctx := context.Background()
	count := intentCounter(t, pool)
	const day = 24 * time.Hour
	cut := time.Now().UTC().Truncate(day).Add(-13 * day)
	var oldest retentiondb.Partition
	if err := pool.QueryRow(ctx, `SELECT name, parent, lower, upper FROM effectd.partitions
		WHERE parent = 'intents' AND upper <= $1 AND lower <= (SELECT min(created_at) FROM effectd.intents)
		ORDER BY lower DESC LIMIT 1`, cut).
		Scan(&oldest.Name, &oldest.Parent, &oldest.Lower, &oldest.Upper); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := pool.QueryRow(ctx, `
UPDATE effectd.intents SET status = 'FAILED', updated_at = created_at
WHERE (bucket, event_id) IN (SELECT bucket, event_id FROM effectd.intents WHERE created_at >= $1 AND created_at < $2 ORDER BY id LIMIT 1)
RETURNING id`, oldest.Lower.Time, oldest.Upper.Time).Scan(&id); err != nil {
		t.Fatalf("a FAILED intent in %s: %v", oldest.Name, err)
	}
	inOldest := count(`created_at >= $1 AND created_at < $2`, oldest.Lower.Time, oldest.Upper.Time)

	requeued := false
	ctx = dispatcher.WithPartitionChecked(ctx, func(p retentiondb.Partition) {
		if p.Name != oldest.Name || requeued {
			return
		}
		requeued = true
		if _, _, err := operator.New(pool, storeOf(pool, effectdtype.Citus)).Operate(ctx, operator.Operation{IntentID: id, Event: statemachine.Requeue,
			Actor: "oncall", Reason: "provider fixed", Force: true}); err != nil {
			t.Errorf("requeue of intent %d: %v", id, err)
		}
	})
	dropped, held, err := citus.New(pool, 0, nil).DropExpiredPartitions(ctx, 13*day)
	if err != nil {
		t.Fatalf("DropExpiredPartitions: %v", err)
	}
	if !requeued {
		t.Fatalf("%s was not dropped one by one (dropped %v)", oldest.Name, dropped)
	}
	for _, p := range dropped {
		if p.Name == oldest.Name {
			t.Errorf("%s counted dropped", oldest.Name)
		}
	}
	if held != 1 {
		t.Errorf("held %d partitions, want 1 (%s)", held, oldest.Name)
	}
	if n := count(`id = $1 AND status = 'PENDING'`, id); n != 1 {
		t.Fatalf("intent %d requeued between the check and the detach: %d PENDING rows; want it kept", id, n)
	}
	if n := count(`created_at >= $1 AND created_at < $2`, oldest.Lower.Time, oldest.Upper.Time); n != inOldest {
		t.Errorf("%d intents left in %s, want all %d", n, oldest.Name, inOldest)
	}
}

// TestCitusPruneShortRetention: in the distributed mode a channel that keeps
// its history for less than a day has its settled intents deleted row by row,
// bucket by bucket, as on one node: the old SENT intents of every bucket go
// with their attempts, the recent ones, an old IN_DOUBT one and the other
// channel's stay, and the counts by status still equal the rows.
func TestCitusPruneShortRetention(t *testing.T) {
	const buckets = 4
	pool := citusPool(t, buckets)
	ctx := context.Background()
	p := &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) { return "ref-" + key, nil }}
	short := fastPolicy("webhook")
	short.Retention = policy.Duration(time.Hour)
	chans := []dispatcher.Channel{
		{Name: "short", Kind: "webhook", Provider: p, Policy: short},
		{Name: "long", Kind: "webhook", Provider: p, Policy: fastPolicy("webhook")},
	}
	d := run(t, pool, dispatcher.Config{Channels: chans, Buckets: buckets, BucketLease: 2 * time.Second})
	const n = 12
	for i := range n {
		for _, ch := range []string{"short", "long"} {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO producer.orders (bucket, id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, i%buckets, i); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `SELECT effectd.enqueue(event_id => $1, channel => $2, payload => '{}', bucket => $3)`,
				fmt.Sprintf("e-%d", i), ch, i%buckets); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := intentCounter(t, pool)
	eventually(t, 60*time.Second, "every intent SENT", func() bool { return count(`status = 'SENT'`) == 2*n })
	// Half of each channel's intents last changed two hours ago, one of them IN_DOUBT.
	if _, err := pool.Exec(ctx, `UPDATE effectd.intents SET updated_at = now() - interval '2 hours'
		WHERE substr(event_id, 3)::int % 2 = 0`); err != nil {
		t.Fatal(err)
	}
	checkCitusCounts(t, pool, "before the prune")
	// (by hand, so no count follows it: it is made SENT again before the counts are compared)
	if _, err := pool.Exec(ctx, `UPDATE effectd.intents SET status = 'IN_DOUBT' WHERE channel = 'short' AND event_id = 'e-0'`); err != nil {
		t.Fatal(err)
	}
	deleted, err := dispatcher.Prune(ctx, d)
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}
	if want := int64(n/2 - 1); deleted != want {
		t.Errorf("Prune deleted %d intents, want %d (the old SENT ones of channel short)", deleted, want)
	}
	if got := count(`channel = 'short' AND updated_at < now() - interval '1 hour' AND status = 'SENT'`); got != 0 {
		t.Errorf("%d old SENT intents of channel short left", got)
	}
	if got := count(`channel = 'short'`); got != n/2+1 {
		t.Errorf("channel short keeps %d intents, want %d (the recent ones and the IN_DOUBT one)", got, n/2+1)
	}
	if got := count(`channel = 'long'`); got != n {
		t.Errorf("channel long keeps %d intents, want all %d", got, n)
	}
	var orphans int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.attempts a
		WHERE NOT EXISTS (SELECT 1 FROM effectd.intents i WHERE i.bucket = a.bucket AND i.id = a.intent_id)`).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Errorf("%d attempt rows left without their intent", orphans)
	}
	if _, err := pool.Exec(ctx, `UPDATE effectd.intents SET status = 'SENT' WHERE channel = 'short' AND event_id = 'e-0'`); err != nil {
		t.Fatal(err)
	}
	checkCitusCounts(t, pool, "after the prune")
}
