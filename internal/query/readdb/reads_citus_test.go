//go:build citus

package readdb

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/citustest"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/migrations"
)

func init() { pgtest.AtExit(citustest.Stop) }

// citusHistory returns a pool on a fresh Citus database in the distributed
// mode (32 buckets co-located with producer.orders, on shards shards) with
// the channels bench, pay and sms and a partition per day of the last 15.
func citusHistory(t testing.TB, shards int) *pgxpool.Pool {
	t.Helper()
	citustest.Cluster(t)
	pool := citustest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE SCHEMA producer;
		CREATE TABLE producer.orders (bucket int NOT NULL, id bigint NOT NULL, PRIMARY KEY (bucket, id))`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT create_distributed_table('producer.orders', 'bucket', shard_count => $1)`, shards); err != nil {
		t.Fatal(err)
	}
	if err := migrations.New(pool).Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.New(pool).Distribute(ctx, migrations.Citus{Schema: "producer", Table: "orders", Column: "bucket", Buckets: 32}); err != nil {
		t.Fatal(err)
	}
	if err := harnessdb.AddChannels(ctx, pool, map[string]string{"bench": "webhook", "pay": "stripe", "sms": "twilio"}); err != nil {
		t.Fatal(err)
	}
	if err := harnessdb.DayPartitions(ctx, pool, 15); err != nil {
		t.Fatal(err)
	}
	return pool
}

// taskPages runs r's statement six times, then EXPLAIN (ANALYZE, BUFFERS) of
// it with every task shown, and returns the shared buffers the workers'
// plans touched, summed over the tasks, with the plan.
func taskPages(t *testing.T, pool *pgxpool.Pool, r flatRead) (int64, string) {
	t.Helper()
	ctx := context.Background()
	if r.list != nil {
		f := *r.list
		if f.Since != nil {
			if err := pool.QueryRow(ctx, idBeforeSQL, *f.Since).Scan(&f.After); err != nil {
				t.Fatal(err)
			}
		}
		r.sql, r.args = intentList{IntentFilter: f, scopeAtOnce: true}.statement()
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET citus.explain_all_tasks = on`); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, `RESET citus.explain_all_tasks`)
	for range 6 {
		rows, err := conn.Query(ctx, r.sql, r.args...)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		rows.Close()
		if rows.Err() != nil {
			t.Fatalf("%s: %v", r.name, rows.Err())
		}
	}
	var plan []byte
	args := append([]any{pgx.QueryExecModeExec}, r.args...)
	if err := conn.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+r.sql, args...).Scan(&plan); err != nil {
		t.Fatalf("%s: explain: %v", r.name, err)
	}
	var doc any
	if err := json.Unmarshal(plan, &doc); err != nil {
		t.Fatalf("%s: explain: %v", r.name, err)
	}
	pages, tasks := remotePages(doc)
	if tasks == 0 {
		t.Fatalf("%s: no task in the plan: %s", r.name, plan)
	}
	return pages, string(plan)
}

// remotePages sums the shared buffers (hit and read) of the top node of every
// task's remote plan in a Citus EXPLAIN (FORMAT JSON), and counts the tasks.
func remotePages(v any) (pages int64, tasks int) {
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			p, n := remotePages(x)
			pages, tasks = pages+p, tasks+n
		}
	case map[string]any:
		if remote, ok := v["Remote Plan"]; ok {
			if top := firstPlan(remote); top != nil {
				hit, _ := top["Shared Hit Blocks"].(float64)
				read, _ := top["Shared Read Blocks"].(float64)
				return int64(hit + read), 1
			}
		}
		for _, x := range v {
			p, n := remotePages(x)
			pages, tasks = pages+p, tasks+n
		}
	}
	return pages, tasks
}

// firstPlan returns the first "Plan" object within v.
func firstPlan(v any) map[string]any {
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			if p := firstPlan(x); p != nil {
				return p
			}
		}
	case map[string]any:
		if p, ok := v["Plan"].(map[string]any); ok {
			return p
		}
	}
	return nil
}

// citusReads are the reads of flatReads that run on the distributed intents
// (the counts are another matter in this mode: counts_kind "scanned"; the
// provider events stay on the coordinator, as on one node), and one intent
// by its id.
func citusReads() []flatRead {
	var out []flatRead
	for _, r := range flatReads() {
		if r.list != nil {
			out = append(out, r)
		}
	}
	return append(out, flatRead{name: "one intent by id", sql: selectIntentSQL, args: []any{int64(77)}})
}

// TestCitusReadsFlatInHistory: on the distributed layout, every list read
// and the read of one intent touch about as many pages on the workers with
// five times the history, as TestReadsFlatInHistory asks on one node. Two
// shards hold the 32 buckets, so a shard's day partition holds hundreds of
// rows. Before migrations/citus/lookups.sql, every key a read without a
// bucket could use had bucket in front: a page in id order, an event id, an
// idempotency key and one intent by id read every row of every shard.
func TestCitusReadsFlatInHistory(t *testing.T) {
	pool := citusHistory(t, 2)
	ctx := context.Background()
	load := func(from, n, final int) {
		t.Helper()
		if err := harnessdb.LoadHistoryBuckets(ctx, pool, harnessdb.History{From: from, N: n, Final: final}, 32); err != nil {
			t.Fatal(err)
		}
		if err := harnessdb.VacuumHistory(ctx, pool); err != nil {
			t.Fatal(err)
		}
	}
	// each load spread over the 14 days, as seedHistory's: every day
	// partition holds rows at both sizes
	load(0, 10_000, 10_000)
	small := map[string]int64{}
	for _, r := range citusReads() {
		small[r.name], _ = taskPages(t, pool, r)
	}
	load(10_000, 40_000, 50_000)
	for _, r := range citusReads() {
		n, plan := taskPages(t, pool, r)
		t.Logf("%-50s %5d pages at 10,000, %5d at 50,000", r.name, small[r.name], n)
		if float64(n) > 1.5*float64(small[r.name])+80 {
			t.Errorf("%s: %d pages at 10,000 intents, %d at 50,000: the read grows with history\n%s\n%s",
				r.name, small[r.name], n, r.sql, compactTasks(plan))
		}
	}
}

// compactTasks is compact for a Citus plan: the first task's nodes.
func compactTasks(plan string) string {
	c := compact(plan)
	if i := strings.Index(c, `"Node Type": "Limit"`); i > 0 && len(c) > i+1500 {
		return c[:i+1500] + " …"
	}
	return c
}
