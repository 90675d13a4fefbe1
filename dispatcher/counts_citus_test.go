//go:build citus

package dispatcher_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/query/readdb"
	"github.com/effectd/effectd/internal/query/retentiondb"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/statemachine"
)

// checkCitusCounts compares what GET /v1/stats reads (operator.Service.Stats: the
// counts by status, the deliveries of settled intents) with a count of the
// rows themselves.
func checkCitusCounts(t *testing.T, pool *pgxpool.Pool, when string) {
	t.Helper()
	ctx := context.Background()
	stats, err := operator.New(pool, storeOf(pool, effectdtype.Citus)).Stats(ctx, nil)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	got := map[string]int64{}
	for name, cs := range stats.Channels {
		if cs.CountsKind != effectdtype.CountsExact {
			t.Errorf("%s: counts_kind %q, want %q", when, cs.CountsKind, effectdtype.CountsExact)
		}
		for s, n := range cs.Counts {
			if n != 0 {
				got[name+"/"+string(s)] = n
			}
		}
		for d, n := range map[string]int64{"accepted": cs.Deliveries.Accepted, "delivered": cs.Deliveries.Delivered, "undelivered": cs.Deliveries.Undelivered} {
			if n != 0 {
				got[name+"/delivery:"+d] = n
			}
		}
	}
	want := map[string]int64{}
	rows, err := pool.Query(ctx, `
SELECT channel || '/' || status, count(*) FROM effectd.intents GROUP BY 1
UNION ALL
SELECT channel || '/delivery:' || delivery, count(*) FROM effectd.intents
WHERE status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED') AND delivery IS NOT NULL GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var k string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&k, &n}, func() error { want[k] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: counts read %v, rows %v", when, got, want)
	}
	t.Logf("%s: %v", when, got)
}

// TestCitusCountsFollowChanges: in the distributed mode the counts by status
// and the deliveries (kept by the statements that change intents, no trigger)
// equal a count(*) over the rows after completions that succeed and fail, a
// maybe-sent call the reconciler settles, an operator's requeue, cancel and
// resolves, a fold, changes after the fold, and the drop of a day partition
// (its counts go with it, folded or not, on every shard).
func TestCitusCountsFollowChanges(t *testing.T) {
	const buckets = 8
	pool := citusPool(t, buckets)
	ctx := context.Background()
	p := &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) {
		switch {
		case strings.HasSuffix(key, ":fail"):
			return "", providerErr{}
		case strings.HasSuffix(key, ":maybe") && n == 1:
			return "", providerErr{retryable: true, maybeSent: true}
		}
		return "ref-" + key, nil
	}}
	chans := []dispatcher.Channel{{Name: "c", Kind: "webhook", Provider: p, Policy: fastPolicy("webhook")}}
	run(t, pool, dispatcher.Config{Channels: chans, Buckets: buckets, BucketLease: 2 * time.Second,
		ReconcileInterval: 50 * time.Millisecond, RefreshInterval: 100 * time.Millisecond})

	produce := func(i int, event string, later bool) {
		t.Helper()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `INSERT INTO producer.orders (bucket, id) VALUES ($1, $2)`, i%buckets, i); err != nil {
			t.Fatal(err)
		}
		var notBefore *time.Time
		if later {
			nb := time.Now().Add(time.Hour)
			notBefore = &nb
		}
		if _, err := tx.Exec(ctx, `SELECT effectd.enqueue(event_id => $1, channel => 'c', payload => '{}', bucket => $2, not_before => $3)`,
			event, i%buckets, notBefore); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 40 {
		event := fmt.Sprintf("order-%d", i)
		switch i % 5 {
		case 1:
			event += ":fail"
		case 3:
			event += ":maybe"
		}
		produce(i, event, false)
	}
	for i := 40; i < 44; i++ {
		produce(i, fmt.Sprintf("later-%d", i), true) // stay PENDING for the operator
	}
	settled := func(what string, pending int) {
		t.Helper()
		eventually(t, 60*time.Second, what, func() bool {
			var live int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE status IN ('PENDING', 'SENDING', 'IN_DOUBT')`).Scan(&live); err != nil {
				t.Fatal(err)
			}
			return live == pending
		})
	}
	settled("all but the later intents settled", 4)
	checkCitusCounts(t, pool, "after completions")

	id := func(event string) int64 {
		t.Helper()
		var id int64
		if err := pool.QueryRow(ctx, `SELECT id FROM effectd.intents WHERE event_id = $1`, event).Scan(&id); err != nil {
			t.Fatalf("%s: %v", event, err)
		}
		return id
	}
	operate := func(event string, ev statemachine.Event, ref string) {
		t.Helper()
		if _, _, err := operator.New(pool, storeOf(pool, effectdtype.Citus)).Operate(ctx, operator.Operation{IntentID: id(event), Event: ev, Actor: "test",
			ProviderRef: ref, Reason: "test", Force: true}); err != nil {
			t.Fatalf("%s %s: %v", ev, event, err)
		}
	}
	bucketOf := func(event string) int64 {
		t.Helper()
		var b int64
		if err := pool.QueryRow(ctx, `SELECT bucket FROM effectd.intents WHERE event_id = $1`, event).Scan(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	inDoubt := func(event string) {
		t.Helper()
		// PENDING → IN_DOUBT: neither is counted, so no delta is due
		if _, err := pool.Exec(ctx, `UPDATE effectd.intents SET status = 'IN_DOUBT' WHERE bucket = $1 AND id = $2`,
			bucketOf(event), id(event)); err != nil {
			t.Fatal(err)
		}
	}
	operate("order-1:fail", statemachine.Requeue, "") // FAILED → PENDING, then FAILED again
	operate("order-6:fail", statemachine.Requeue, "")
	operate("later-40", statemachine.Cancel, "") // PENDING → CANCELLED
	inDoubt("later-41")
	operate("later-41", statemachine.ResolveSent, "ref-by-hand") // IN_DOUBT → SENT, delivery accepted
	inDoubt("later-42")
	operate("later-42", statemachine.ResolveSkip, "") // IN_DOUBT → SKIPPED
	operate("later-42", statemachine.Requeue, "")     // SKIPPED → PENDING, then SENT
	settled("the operator's intents settled", 1)
	checkCitusCounts(t, pool, "after operator actions")
	if err := readdb.FoldSettledCountsBucket(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var deltas int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intent_count_deltas`).Scan(&deltas); err != nil || deltas != 0 {
		t.Fatalf("deltas after a fold: %d, %v", deltas, err)
	}
	checkCitusCounts(t, pool, "after a fold")
	operate("later-43", statemachine.Cancel, "") // a delta of today's partition not folded
	operate("order-11:fail", statemachine.Requeue, "")
	settled("everything settled", 0)
	checkCitusCounts(t, pool, "after changes since the fold")

	// an intent of the next day's partition, cancelled: its count stays when
	// today's partition (everything else) is dropped
	var today retentiondb.Partition
	if err := pool.QueryRow(ctx, `SELECT name, parent, lower, upper FROM effectd.partitions WHERE parent = 'intents' AND now() >= lower AND now() < upper`).
		Scan(&today.Name, &today.Parent, &today.Lower, &today.Upper); err != nil {
		t.Fatal(err)
	}
	fixture.Intent(t, pool, fixture.Bucket(3), fixture.Event("next-day"), fixture.Channel("c"),
		fixture.CreatedAt(today.Upper.Time.Add(time.Hour)), fixture.NeverDue())
	operate("next-day", statemachine.Cancel, "")
	session, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Release()
	if err := retentiondb.DropPartition(ctx, session.Conn(), today, 0); err != nil {
		t.Fatal(err)
	}
	checkCitusCounts(t, pool, "after the drop of "+today.Name)
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents`).Scan(&left); err != nil || left != 1 {
		t.Fatalf("intents left after the drop: %d, %v; want the next day's one", left, err)
	}
}

// TestCitusCountsReadNoHistory: in the distributed mode the counts, the
// gauges and both together (stats) read only the live rows of intents (the
// partial indexes of every shard), never the settled history: with 30,000
// settled intents and 6 live ones, every scan of an intents shard, on every
// worker, returns or filters out at most a few rows.
func TestCitusCountsReadNoHistory(t *testing.T) {
	pool := citusPool(t, 8)
	ctx := context.Background()
	fixture.AddChannel(t, pool, "c", "webhook")
	fixture.AddChannel(t, pool, "d", "twilio")
	fixture.Intents(t, pool, 30000, func(g int) []fixture.IntentOption {
		return []fixture.IntentOption{fixture.Bucket(int64(g % 8)), fixture.Event(fmt.Sprintf("h%d", g)),
			fixture.Channel([]string{"c", "d"}[g%2]), fixture.Status("SENT"), fixture.Attempts(0), fixture.Delivery("delivered", "")}
	})
	fixture.Intents(t, pool, 6, func(g int) []fixture.IntentOption {
		opts := []fixture.IntentOption{fixture.Bucket(int64(g % 8)), fixture.Event(fmt.Sprintf("l%d", g)), fixture.Channel("c"),
			fixture.Status([]string{"PENDING", "SENDING", "IN_DOUBT"}[g%3]), fixture.Attempts(0)}
		if g%3 == 1 {
			opts = append(opts, fixture.Lease(time.Now().Add(-time.Minute)))
		}
		return opts
	})
	for _, q := range []string{
		`ANALYZE effectd.intents`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET citus.explain_all_tasks = on`); err != nil {
		t.Fatal(err)
	}
	scan := regexp.MustCompile(` on (intents_\S+) .*\(actual rows=(\d+) loops=(\d+)\)`)
	removed := regexp.MustCompile(`Rows Removed by (?:Filter|Index Recheck): (\d+)`)
	for _, r := range []struct{ file, args string }{
		{"channel_counts_bucket.sql", "(NULL)"},
		{"channel_counts_bucket.sql", "('c')"},
		{"channel_gauges_bucket.sql", ""},
		{"channel_figures_bucket.sql", ""},
	} {
		sql, err := os.ReadFile("../internal/query/readdb/" + r.file)
		if err != nil {
			t.Fatal(err)
		}
		name := "p" + strconv.Itoa(len(r.args)) + strings.TrimSuffix(r.file, ".sql")
		if _, err := conn.Exec(ctx, "PREPARE "+name+" AS "+string(sql)); err != nil {
			t.Fatalf("%s: %v", r.file, err)
		}
		rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE "+name+r.args)
		if err != nil {
			t.Fatalf("%s: %v", r.file, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("%s: %v", r.file, err)
		}
		read, scans, inIntents := 0, 0, false
		for _, l := range lines {
			if m := scan.FindStringSubmatch(l); m != nil {
				rows, _ := strconv.Atoi(m[2])
				loops, _ := strconv.Atoi(m[3])
				read += rows * loops
				scans++
				inIntents = true
			} else if strings.Contains(l, "->") || strings.Contains(l, "Task") {
				inIntents = false
			}
			if m := removed.FindStringSubmatch(l); m != nil && inIntents {
				n, _ := strconv.Atoi(m[1])
				read += n
			}
		}
		t.Logf("%s%s: %d rows of intents read in %d scans of intents shards", r.file, r.args, read, scans)
		if scans == 0 || read > 30 {
			t.Errorf("%s%s reads %d rows of intents in %d scans with 6 live rows and 30,000 settled:\n%s",
				r.file, r.args, read, scans, strings.Join(lines, "\n"))
		}
	}
}
