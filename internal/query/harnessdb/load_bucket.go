package harnessdb

import (
	"context"
	_ "embed"

	"github.com/effectd/effectd/internal/query"
)

// The distributed mode's history load (the citus-scale bench): the same
// history as LoadHistory, each intent and its attempt in a bucket.

//go:embed load_history_bucket.sql
var loadHistoryBucketSQL string

//go:embed load_after_bucket.sql
var loadAfterBucketSQL string

//go:embed load_events_after.sql
var loadEventsAfterSQL string

//go:embed load_mark_after.sql
var loadMarkAfterSQL string

//go:embed load_count_bucket.sql
var loadCountBucketSQL string

//go:embed load_in_doubt_bucket.sql
var loadInDoubtBucketSQL string

//go:embed intents_max_id.sql
var intentsMaxIDSQL string

// LoadHistoryBuckets is LoadHistory on the distributed layout (effectd
// migrated with database.citus): the same intents, attempts, provider events,
// id marks, IN_DOUBT intents and orphan events, intent n in bucket n % buckets
// with its attempt, a quarter of a million intents per round of statements,
// each round's settled intents counted as the statements that settle them
// would have.
func LoadHistoryBuckets(ctx context.Context, db query.DB, h History, buckets int) error {
	const chunk = 250_000
	total := h.From + h.N
	for lo := h.From + 1; lo <= total; lo += chunk {
		hi := min(lo+chunk-1, total)
		var last int64
		if err := db.QueryRow(ctx, intentsMaxIDSQL).Scan(&last); err != nil {
			return err
		}
		if _, err := db.Exec(ctx, loadHistoryBucketSQL, lo, hi, int64(h.Final), buckets); err != nil {
			return err
		}
		for _, q := range []string{loadAfterBucketSQL, loadEventsAfterSQL, loadMarkAfterSQL, loadCountBucketSQL} {
			if _, err := db.Exec(ctx, q, last); err != nil {
				return err
			}
		}
	}
	if h.From > 0 {
		return nil
	}
	if _, err := db.Exec(ctx, loadInDoubtBucketSQL); err != nil {
		return err
	}
	_, err := db.Exec(ctx, loadOrphanEventsSQL)
	return err
}
