package citus

import (
	"context"

	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/internal/query/intentdb"
)

// bulkBatch is how many intents of one bucket a bulk action changes in one
// statement.
const bulkBatch = 500

// ApplyBulk hands the frozen rows of snapshot to batch a bucket at a time, at
// most bulkBatch rows per call, so that each batch's reads and writes are on
// its bucket's shard; a batch that fails as a whole goes to one row by row,
// so one row's failure never stops the others. A row whose intent is gone
// (no bucket) goes to one.
func (s *Store) ApplyBulk(ctx context.Context, db query.DB, snapshot string, one func(intentdb.FrozenRow) error, batch func(int64, []intentdb.FrozenRow) error) error {
	list, err := intentdb.BulkRowsBucket(ctx, db, snapshot)
	if err != nil {
		return err
	}
	byBucket := map[int64][]intentdb.FrozenRow{}
	var order []int64
	for _, f := range list {
		if f.Bucket < 0 {
			if err := one(f.FrozenRow); err != nil {
				return err
			}
			continue
		}
		if _, ok := byBucket[f.Bucket]; !ok {
			order = append(order, f.Bucket)
		}
		byBucket[f.Bucket] = append(byBucket[f.Bucket], f.FrozenRow)
	}
	for _, b := range order {
		for rows := byBucket[b]; len(rows) > 0; rows = rows[min(len(rows), bulkBatch):] {
			part := rows[:min(len(rows), bulkBatch)]
			if batch(b, part) == nil {
				continue
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			for _, f := range part {
				if err := one(f); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
