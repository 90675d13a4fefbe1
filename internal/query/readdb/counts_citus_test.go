//go:build citus

package readdb

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query/harnessdb"
)

// shardRounds counts the jobs of a Citus EXPLAIN (FORMAT JSON) that send a
// task to each of at least shards shards: the rounds over every shard the
// statement makes, in its subplans and its final query.
func shardRounds(v any, shards int) int {
	n := 0
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			n += shardRounds(x, shards)
		}
	case map[string]any:
		if tasks, ok := v["Task Count"].(float64); ok && int(tasks) >= shards {
			n++
		}
		for _, x := range v {
			n += shardRounds(x, shards)
		}
	}
	return n
}

// TestCitusCountsOneRound: the counts and the gauges that stats, the channel
// pages and /metrics read in the distributed mode are each one round of
// tasks over the shards, so their cost is a shard's task once and not once
// per state counted. Written with an aggregate by channel per state, the
// counts made four rounds and the gauges four.
func TestCitusCountsOneRound(t *testing.T) {
	const shards = 4
	pool := citusHistory(t, shards)
	ctx := context.Background()
	if err := harnessdb.LoadHistoryBuckets(ctx, pool, harnessdb.History{From: 0, N: 2_000, Final: 2_000}, 32); err != nil {
		t.Fatal(err)
	}
	// live rows beside the loaded history: due and future PENDING rows, and
	// SENDING rows past their lease and within it
	for i := range 12 {
		if _, err := pool.Exec(ctx, `SELECT effectd.enqueue(event_id => $1, channel => $2, bucket => $3,
			payload => CASE WHEN $2 = 'bench' THEN '{"type": "x"}' ELSE '{"to": "+15005550006", "body": "hi"}' END::jsonb,
			not_before => CASE WHEN $4 THEN now() + interval '1 hour' END)`,
			fmt.Sprintf("live-%d", i), []string{"bench", "sms"}[i%2], i*5%32, i%4 == 3); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE effectd.intents SET status = 'SENDING',
		lease_expires_at = now() + CASE WHEN event_id IN ('live-0', 'live-1', 'live-4') THEN interval '-1 minute' ELSE interval '1 hour' END
		WHERE event_id IN ('live-0', 'live-1', 'live-4', 'live-5')`); err != nil {
		t.Fatal(err)
	}
	pay := "pay"
	for _, r := range []struct {
		name string
		sql  string
		args []any
	}{
		{"counts of every channel", channelCountsBucketSQL, []any{nil}},
		{"counts of one channel", channelCountsBucketSQL, []any{&pay}},
		{"gauges", channelGaugesBucketSQL, nil},
		{"counts and gauges together (stats)", channelFiguresBucketSQL, nil},
	} {
		var plan []byte
		if err := pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+r.sql, r.args...).Scan(&plan); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		var doc any
		if err := json.Unmarshal(plan, &doc); err != nil {
			t.Fatal(err)
		}
		if n := shardRounds(doc, shards); n != 1 {
			t.Errorf("%s: %d rounds of tasks over the %d shards, want 1\n%s", r.name, n, shards, compact(string(plan)))
		}
	}

	// What the gauges say is what the rows say, also once the statement
	// runs on a generic plan (pgx prepares it: after five runs PostgreSQL may
	// keep one plan for every value).
	var gauges []effectdtype.ChannelGauges
	for range 8 {
		start := time.Now()
		var err error
		if gauges, err = GaugesBucket(ctx, pool); err != nil {
			t.Fatal(err)
		}
		t.Logf("gauges in %v", time.Since(start))
	}
	type figures struct {
		pastLease, inDoubt, accepted, delivered, undelivered int64
	}
	got, want := map[string]figures{}, map[string]figures{}
	age := map[string]float64{}
	for _, g := range gauges {
		got[g.Channel] = figures{g.SendingPastLease, g.InDoubt, g.Deliveries.Accepted, g.Deliveries.Delivered, g.Deliveries.Undelivered}
		age[g.Channel] = g.OldestPendingAge
		want[g.Channel] = figures{}
	}
	count := func(sql string, add func(f *figures, key string, n int64)) {
		t.Helper()
		rows, err := pool.Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		var channel, key string
		var n int64
		if _, err := pgx.ForEachRow(rows, []any{&channel, &key, &n}, func() error {
			f := want[channel]
			add(&f, key, n)
			want[channel] = f
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	count(`SELECT channel, '', count(*) FROM effectd.intents WHERE status = 'SENDING' AND lease_expires_at < now() GROUP BY channel`,
		func(f *figures, _ string, n int64) { f.pastLease = n })
	count(`SELECT channel, '', count(*) FROM effectd.intents WHERE status = 'IN_DOUBT' GROUP BY channel`,
		func(f *figures, _ string, n int64) { f.inDoubt = n })
	count(`SELECT channel, delivery, count(*) FROM effectd.intents
		WHERE status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED') AND delivery IS NOT NULL GROUP BY channel, delivery`,
		func(f *figures, delivery string, n int64) {
			switch delivery {
			case "accepted":
				f.accepted = n
			case "delivered":
				f.delivered = n
			case "undelivered":
				f.undelivered = n
			}
		})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("gauges read %v, rows say %v", got, want)
	}
	rows, err := pool.Query(ctx, `SELECT channel, extract(epoch FROM now() - min(next_attempt_at))::float8
		FROM effectd.intents WHERE status = 'PENDING' AND next_attempt_at <= now() GROUP BY channel`)
	if err != nil {
		t.Fatal(err)
	}
	var channel string
	var oldest float64
	if _, err := pgx.ForEachRow(rows, []any{&channel, &oldest}, func() error {
		if a := age[channel]; a > oldest+2 || a < oldest-2 || a == 0 {
			t.Errorf("%s: oldest pending intent waited %.1f s, the gauge says %.1f s", channel, oldest, a)
		}
		delete(age, channel)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for channel, a := range age {
		if a != 0 {
			t.Errorf("%s: no due PENDING intent, the gauge says the oldest waited %.1f s", channel, a)
		}
	}
	t.Logf("gauges: %v", got)

	// Figures (stats) reads in one round what ChannelCounts and Gauges read
	// in two: the same counts, the same gauges.
	counts, err := ChannelCountsBucket(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 8 {
		figCounts, figGauges, err := FiguresBucket(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(figCounts, func(a, b StatusCount) int {
			return cmp.Or(cmp.Compare(a.Channel, b.Channel), cmp.Compare(a.Status, b.Status))
		})
		slices.SortFunc(counts, func(a, b StatusCount) int {
			return cmp.Or(cmp.Compare(a.Channel, b.Channel), cmp.Compare(a.Status, b.Status))
		})
		if fmt.Sprint(figCounts) != fmt.Sprint(counts) {
			t.Fatalf("Figures counts %v, ChannelCounts %v", figCounts, counts)
		}
		if len(figGauges) != len(gauges) {
			t.Fatalf("Figures gauges of %d channels, Gauges of %d", len(figGauges), len(gauges))
		}
		for i, g := range figGauges {
			w := gauges[i]
			if g.Channel != w.Channel || g.SendingPastLease != w.SendingPastLease || g.InDoubt != w.InDoubt ||
				g.Deliveries != w.Deliveries || g.OldestPendingAge > w.OldestPendingAge+2 || g.OldestPendingAge < w.OldestPendingAge-2 {
				t.Fatalf("Figures gauges %+v, Gauges %+v", g, w)
			}
		}
	}
}

// BenchmarkCitusShardRound prints what one read over every shard costs on
// this cluster, with serve's one connection per worker: the simplest such
// statement (a count of the small counts table), the counts, the gauges, both
// together as stats reads them, the floor of a search (an event id probed in
// every day partition of every shard: what any read that names neither a
// bucket nor a time window pays), and a read of one bucket for scale. 32
// shards, as a producer with 32 buckets has, each with 15 day partitions and
// 3,200 intents loaded.
//
//	go test -tags citus -run '^$' -bench CitusShardRound ./internal/query/
func BenchmarkCitusShardRound(b *testing.B) {
	pool := citusHistory(b, 32)
	ctx := context.Background()
	if err := harnessdb.LoadHistoryBuckets(ctx, pool, harnessdb.History{From: 0, N: 3_200, Final: 3_200}, 32); err != nil {
		b.Fatal(err)
	}
	if err := harnessdb.VacuumHistory(ctx, pool); err != nil {
		b.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET citus.max_adaptive_executor_pool_size = 1`); err != nil {
		b.Fatal(err)
	}
	for _, r := range []struct {
		name string
		sql  string
		args []any
	}{
		{"every shard: count of intent_counts", `SELECT count(*) FROM effectd.intent_counts`, nil},
		{"every shard: counts", channelCountsBucketSQL, []any{nil}},
		{"every shard: gauges", channelGaugesBucketSQL, nil},
		{"every shard: counts and gauges together (stats)", channelFiguresBucketSQL, nil},
		// the floor of a read that names no bucket and no time window (a
		// search): one index probe in every day partition of every shard
		{"every shard: one event id probed in every day", `SELECT count(*) FROM effectd.intents WHERE event_id = 'absent'`, nil},
		{"one bucket: its PENDING intents", `SELECT count(*) FROM effectd.intents WHERE bucket = 7 AND status = 'PENDING'`, nil},
	} {
		b.Run(r.name, func(b *testing.B) {
			for b.Loop() {
				rows, err := conn.Query(ctx, r.sql, r.args...)
				if err != nil {
					b.Fatal(err)
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
