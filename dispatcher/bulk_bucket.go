package dispatcher

import (
	"cmp"
	"context"
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/statemachine"
)

// bulkBatch is how many intents of one bucket a bulk action changes in one
// statement in the distributed mode.
const bulkBatch = 500

// applyBuckets is applyRows in the distributed mode: the frozen rows go a
// bucket at a time, at most bulkBatch per transaction (applyBatch), each
// batch's reads and writes on its bucket's shard. A batch that fails as a
// whole is applied again row by row (applyOne), so one row's failure never
// stops the others.
func applyBuckets(ctx context.Context, pool *pgxpool.Pool, a BulkApply, ev statemachine.Event, reason string) (res effectdtype.BulkResult, err error) {
	list, err := query.BulkRowsBucket(ctx, pool, a.Snapshot)
	if err != nil {
		return res, err
	}
	byBucket := map[int64][]query.FrozenRow{}
	var order []int64
	for _, f := range list {
		if !seen(a.Sees, f.Channel) || f.Bucket < 0 { // gone: nothing left to act on
			res.Skipped++
			continue
		}
		if _, ok := byBucket[f.Bucket]; !ok {
			order = append(order, f.Bucket)
		}
		byBucket[f.Bucket] = append(byBucket[f.Bucket], f.FrozenRow)
	}
	for _, b := range order {
		for rows := byBucket[b]; len(rows) > 0; rows = rows[min(len(rows), bulkBatch):] {
			batch := rows[:min(len(rows), bulkBatch)]
			applied, err := applyBatch(ctx, pool, a, ev, reason, b, batch)
			if err == nil {
				res.Applied += applied
				res.Skipped += len(batch) - applied
				continue
			}
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			cmp.Or(a.Logger, slog.Default()).WarnContext(ctx, "bulk apply: a bucket's batch failed, applied row by row", "snapshot", a.Snapshot, "bucket", b, "err", err)
			for _, f := range batch {
				if err := applyOne(ctx, pool, effectdtype.Citus, a, ev, reason, f, &res); err != nil {
					return res, err
				}
			}
		}
	}
	return res, nil
}

// applyBatch applies ev to rows, intents of bucket, in one transaction: it
// locks them, checks each as Operate does (still the intent frozen, by its
// idempotency key, in the state and attempt frozen, ev allowed from it, the
// provider's key window before a send again), changes the rows that pass in
// one statement with their count deltas and operator attempts, and writes an
// audit entry for each row changed. It returns how many it changed.
func applyBatch(ctx context.Context, pool *pgxpool.Pool, a BulkApply, ev statemachine.Event, reason string, bucket int64, rows []query.FrozenRow) (int, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	ids := make([]int64, len(rows))
	for i, f := range rows {
		ids[i] = f.ID
	}
	locked, err := query.LockIntentsBucket(ctx, tx, bucket, ids)
	if err != nil {
		return 0, err
	}
	before := make(map[int64]effectdtype.IntentRow, len(locked))
	for _, r := range locked {
		before[r.ID] = r
	}
	var moves []query.Move
	for _, f := range rows {
		r, ok := before[f.ID]
		if !ok || r.IdempotencyKey != f.Key || r.Status != f.Status || r.Attempts != f.Attempts {
			continue // gone (its id handed to another intent, too), or changed since the freeze
		}
		to, err := statemachine.Next(r.Status, ev)
		if err != nil {
			continue
		}
		if to == statemachine.Pending {
			var kw *KeyWindowError
			if err := checkKeyWindow(ctx, tx, r); errors.As(err, &kw) {
				continue
			} else if err != nil {
				return 0, err
			}
		}
		moves = append(moves, query.Move{ID: r.ID, From: r.Status, Attempts: r.Attempts, Delivery: deref(r.Delivery), Key: r.IdempotencyKey, To: to})
	}
	if len(moves) == 0 {
		return 0, nil
	}
	after, err := query.OperateBulkBucket(ctx, tx, bucket, string(ev), moves)
	if err != nil {
		return 0, err
	}
	for _, r := range after {
		if err := query.WriteAudit(ctx, tx, query.Audit{Actor: a.Actor, Action: "intent." + string(ev), IntentID: r.ID,
			Channel: r.Channel, Before: intentAudit(before[r.ID]), After: intentAudit(r), Reason: reason, Snapshot: a.Snapshot}); err != nil {
			return 0, err
		}
	}
	return len(after), tx.Commit(ctx)
}
