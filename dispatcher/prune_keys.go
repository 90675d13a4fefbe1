package dispatcher

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/query"
)

// dedupeKeysBatch is how many dedupe keys one DELETE removes.
const dedupeKeysBatch = 10000

// PruneDedupeKeys deletes the dedupe keys (migration 017) whose channel's
// horizon ended before today (UTC) and whose intents partition is gone, a
// batch at a time, on every bucket's shard in the distributed mode (buckets
// > 0), and returns how many it deleted. A key outlives its intent: while the
// oldest intents partition remains (held by a live row, say), the keys of its
// days and later stay.
func PruneDedupeKeys(ctx context.Context, pool *pgxpool.Pool, now time.Time, buckets int) (int64, error) {
	bound, ok, err := query.DedupeKeysBound(ctx, pool)
	if err != nil || !ok {
		return 0, err
	}
	today := now.UTC().Truncate(24 * time.Hour)
	var total int64
	prune := func(bucket *int) error {
		for ctx.Err() == nil {
			n, err := query.PruneDedupeKeys(ctx, pool, today, bound, dedupeKeysBatch, bucket)
			if err != nil {
				return err
			}
			total += n
			if n < dedupeKeysBatch {
				return nil
			}
		}
		return ctx.Err()
	}
	if buckets == 0 {
		return total, prune(nil)
	}
	for b := range buckets {
		if err := prune(&b); err != nil {
			return total, err
		}
	}
	return total, nil
}

// pruneDedupeKeys runs PruneDedupeKeys for the pruner, counting what it
// deleted in effectd_dedupe_keys_pruned_total.
func (pr *pruner) pruneDedupeKeys(ctx context.Context) error {
	buckets := 0
	if pr.d.buckets != nil {
		buckets = pr.d.buckets.buckets
	}
	n, err := PruneDedupeKeys(ctx, pr.d.pool, time.Now(), buckets)
	pr.d.m.dedupeKeysPruned.Add(float64(n))
	return err
}
