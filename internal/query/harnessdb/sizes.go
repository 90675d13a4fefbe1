package harnessdb

import (
	"context"
	_ "embed"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/query"
)

// How large effectd's partitioned tables are, from the catalog and the
// statistics collector: what the benches report as history grows.

//go:embed table_size.sql
var tableSizeSQL string

//go:embed table_stats.sql
var tableStatsSQL string

//go:embed partition_rows.sql
var partitionRowsSQL string

// TableSize returns the bytes of the partitions of effectd's table (intents,
// attempts or provider_events): heap and TOAST, and indexes apart.
func TableSize(ctx context.Context, db query.DB, table string) (heap, indexes int64, err error) {
	err = db.QueryRow(ctx, tableSizeSQL, pgx.Identifier{"effectd", table}.Sanitize()).Scan(&heap, &indexes)
	return heap, indexes, err
}

// TableStats are the sizes (bytes) and vacuum figures of intents and
// attempts, summed over their partitions.
type TableStats struct {
	IntentsHeap, IntentsIndexes, IntentsTotal int64 // bytes; the total with TOAST
	IntentsLive, IntentsDead, IntentsAutovac  int64 // rows, and autovacuum runs
	AttemptsTotal                             int64 // bytes, with indexes
	AttemptsDead, AttemptsAutovac             int64
}

// ReadTableStats reads the sizes and vacuum figures of intents and attempts.
func ReadTableStats(ctx context.Context, db query.DB) (s TableStats, err error) {
	err = db.QueryRow(ctx, tableStatsSQL).Scan(
		&s.IntentsHeap, &s.IntentsIndexes, &s.IntentsTotal, &s.IntentsLive, &s.IntentsDead, &s.IntentsAutovac,
		&s.AttemptsTotal, &s.AttemptsDead, &s.AttemptsAutovac)
	return s, err
}

// PartitionRows counts the rows of partition name (such as intents_p20260101).
func PartitionRows(ctx context.Context, db query.DB, name string) (n int64, err error) {
	sql := strings.ReplaceAll(partitionRowsSQL, "effectd.partition", pgx.Identifier{"effectd", name}.Sanitize())
	err = db.QueryRow(ctx, sql).Scan(&n)
	return n, err
}
