package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query/accessdb"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/internal/query/readdb"
	"github.com/effectd/effectd/internal/storage"
	"github.com/effectd/effectd/statemachine"
)

// LeaseError refuses to resolve a SENDING intent whose lease is still held:
// its call may be in flight, and only an expired lease makes it stuck.
type LeaseError struct {
	IntentID int64
	Until    time.Time
}

func (e *LeaseError) Error() string {
	return fmt.Sprintf("%s: intent %d is SENDING under a lease held until %s; resolve it after the lease expires",
		statemachine.ErrTransition, e.IntentID, e.Until.UTC().Format(time.RFC3339))
}

// Unwrap makes errors.Is(err, ErrTransition) true.
func (e *LeaseError) Unwrap() error { return statemachine.ErrTransition }

// settleAudited applies an operator's reconcile decision and writes its audit
// entry in one transaction; it reports whether the decision was applied.
func settleAudited(ctx context.Context, pool *pgxpool.Pool, store storage.Operator, s intentdb.SettleParams, actor string) (applied bool, err error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	before, err := readIntent(ctx, tx, s.IntentID)
	if errors.Is(err, ErrNotFound) {
		return false, nil // gone since it was read: nothing to settle
	}
	if err != nil {
		return false, err
	}
	if applied, err = store.SettleByID(ctx, tx, s); err != nil || !applied {
		return false, err
	}
	after, err := readIntent(ctx, tx, s.IntentID)
	if err != nil {
		return false, err
	}
	if err := accessdb.WriteAudit(ctx, tx, accessdb.Audit{Actor: actor, Action: "intent.reconcile", IntentID: s.IntentID,
		Channel: after.Channel, Before: accessdb.IntentAudit(before), After: accessdb.IntentAudit(after), Outcome: s.Outcome}); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// readIntent reads intent id in tx; ErrNotFound when there is none.
func readIntent(ctx context.Context, tx pgx.Tx, id int64) (effectdtype.IntentRow, error) {
	r, err := readdb.SelectIntent(ctx, tx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("intent %d: %w", id, ErrNotFound)
	}
	return r, err
}
