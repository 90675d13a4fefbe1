package retentiondb

import (
	"context"
	_ "embed"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectd/effectd/internal/query"
)

//go:embed dedupe_keys_bound.sql
var dedupeKeysBoundSQL string

//go:embed dedupe_keys_prune.sql
var dedupeKeysPruneSQL string

//go:embed dedupe_keys_prune_bucket.sql
var dedupeKeysPruneBucketSQL string

// DedupeKeysBound returns the first UTC day whose dedupe keys an intents
// partition could still need (dedupe_keys_bound.sql): keys of earlier days
// have no intent left. ok is false while every key may still be needed.
func DedupeKeysBound(ctx context.Context, db query.DB) (day time.Time, ok bool, err error) {
	var d pgtype.Date
	if err := db.QueryRow(ctx, dedupeKeysBoundSQL).Scan(&d); err != nil {
		return time.Time{}, false, err
	}
	if !d.Valid || d.InfinityModifier != pgtype.Finite {
		return time.Time{}, false, nil
	}
	return d.Time, true, nil
}

// PruneDedupeKeys deletes up to limit dedupe keys whose horizon ended before
// today (UTC day) and whose day is before bound (DedupeKeysBound), and
// returns how many it deleted. In the distributed mode (bucket not nil) it
// deletes on that bucket's shard only.
func PruneDedupeKeys(ctx context.Context, db query.DB, today, bound time.Time, limit int, bucket *int) (int64, error) {
	sql, args := dedupeKeysPruneSQL, []any{today.Format(time.DateOnly), bound.Format(time.DateOnly), limit}
	if bucket != nil {
		sql, args = dedupeKeysPruneBucketSQL, append(args, *bucket)
	}
	tag, err := db.Exec(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}
