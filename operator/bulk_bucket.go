package operator

import (
	"context"
	"errors"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query/accessdb"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/statemachine"
)

// applyBatch applies ev to rows, intents of bucket, in one transaction (the
// distributed mode's bulk batches, storage.Operator.ApplyBulk): it skips a
// row out of the actor's sight, locks the others, checks each as Operate
// does (still the intent frozen, by its idempotency key, in the state and
// attempt frozen, ev allowed from it, the provider's key window before a
// send again), changes the rows that pass in one statement with their count
// deltas and operator attempts, and writes an audit entry for each row
// changed. It returns how many it changed.
func (svc *Service) applyBatch(ctx context.Context, a BulkApply, ev statemachine.Event, reason string, bucket int64, rows []intentdb.FrozenRow) (int, error) {
	tx, err := svc.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var ids []int64
	for _, f := range rows {
		if seen(a.Sees, f.Channel) {
			ids = append(ids, f.ID)
		}
	}
	locked, err := intentdb.LockIntentsBucket(ctx, tx, bucket, ids)
	if err != nil {
		return 0, err
	}
	before := make(map[int64]effectdtype.IntentRow, len(locked))
	for _, r := range locked {
		before[r.ID] = r
	}
	var moves []intentdb.Move
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
			var kw *dispatcher.KeyWindowError
			if err := checkKeyWindow(ctx, tx, r); errors.As(err, &kw) {
				continue
			} else if err != nil {
				return 0, err
			}
		}
		moves = append(moves, intentdb.Move{ID: r.ID, From: r.Status, Attempts: r.Attempts, Delivery: deref(r.Delivery), Key: r.IdempotencyKey, To: to})
	}
	if len(moves) == 0 {
		return 0, nil
	}
	after, err := intentdb.OperateBulkBucket(ctx, tx, bucket, string(ev), moves)
	if err != nil {
		return 0, err
	}
	for _, r := range after {
		if err := accessdb.WriteAudit(ctx, tx, accessdb.Audit{Actor: a.Actor, Action: "intent." + string(ev), IntentID: r.ID,
			Channel: r.Channel, Before: accessdb.IntentAudit(before[r.ID]), After: accessdb.IntentAudit(r), Reason: reason, Snapshot: a.Snapshot}); err != nil {
			return 0, err
		}
	}
	return len(after), tx.Commit(ctx)
}

// deref is *s, "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
