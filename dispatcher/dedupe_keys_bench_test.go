package dispatcher_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/storage/onenode"
)

// BenchmarkDedupeKeys measures what the dedupe horizon costs at scale:
// EFFECTD_DEDUPE_KEYS keys (1,000,000 unless set; 10,000,000 for the figure
// in docs/deployment.md, "Tuning PostgreSQL") loaded as enqueue writes them, then the bytes a key takes in
// the table and its indexes, the time an enqueue takes beside them, and the
// time the pruner takes per key it deletes once they have all expired.
//
//	EFFECTD_DEDUPE_KEYS=10000000 go test -run '^$' -bench BenchmarkDedupeKeys -benchtime 1x -timeout 1h ./dispatcher/
func BenchmarkDedupeKeys(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("EFFECTD_DEDUPE_KEYS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("EFFECTD_DEDUPE_KEYS=%q: want a positive count", v)
		}
	}
	pool := registered(b)
	ctx := context.Background()
	start := time.Now()
	fixture.AddDedupeKeys(b, pool, n, func(g int) fixture.DedupeKey {
		return fixture.DedupeKey{Channel: "hook", EventID: fmt.Sprintf("evt_%d", g), Day: fixture.Day(-30), Until: fixture.Day(-15)}
	})
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE effectd.dedupe_keys`); err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d keys in %s", n, time.Since(start).Round(time.Second))
	b.ResetTimer()
	const batch = 10_000
	t0 := time.Now()
	for i := range b.N {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT effectd.enqueue($1 || g, 'hook', '{}') FROM generate_series(1, $2) g`,
				fmt.Sprintf("bench-%d-", i), batch)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(t0).Microseconds())/float64(batch*b.N), "enqueue-µs")
	b.StopTimer()
	var table, indexes int64
	if err := pool.QueryRow(ctx, `SELECT pg_table_size('effectd.dedupe_keys'), pg_indexes_size('effectd.dedupe_keys')`).Scan(&table, &indexes); err != nil {
		b.Fatal(err)
	}
	keys := float64(n + batch*b.N) // the loaded and the enqueued
	b.ReportMetric(float64(table)/keys, "table-bytes/key")
	b.ReportMetric(float64(indexes)/keys, "index-bytes/key")

	// As if the partitions of those days were gone: every loaded key has expired.
	if _, err := pool.Exec(ctx, `UPDATE effectd.partitions SET lower = current_date - 1 WHERE parent = 'intents' AND lower = '-infinity'`); err != nil {
		b.Fatal(err)
	}
	t0 = time.Now()
	pruned, err := onenode.New(pool).PruneDedupeKeys(ctx, time.Now())
	if err != nil || pruned != int64(n) {
		b.Fatalf("PruneDedupeKeys = %d, %v; want %d", pruned, err, n)
	}
	b.ReportMetric(float64(time.Since(t0).Microseconds())/float64(n), "prune-µs/key")
}
