package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/statemachine"
)

// IntentRow is one row of effectd.intents, as the admin API shows it.
type IntentRow struct {
	ID             int64              `json:"id"`
	EventID        string             `json:"event_id"`
	Channel        string             `json:"channel"`
	Payload        json.RawMessage    `json:"payload"`
	Status         statemachine.State `json:"status"`
	Attempts       int                `json:"attempts"`
	NextAttemptAt  time.Time          `json:"next_attempt_at"`
	LeaseExpiresAt *time.Time         `json:"lease_expires_at"`
	ClaimedAt      *time.Time         `json:"claimed_at"`
	IdempotencyKey string             `json:"idempotency_key"`
	ProviderRef    *string            `json:"provider_ref"`
	LastError      *string            `json:"last_error"`
	OrderingKey    *string            `json:"ordering_key"`
	OccurredAt     *time.Time         `json:"occurred_at"`
	CreatedAt      time.Time          `json:"created_at"`
	UpdatedAt      time.Time          `json:"updated_at"`
	Delivery       *string            `json:"delivery"`        // accepted | delivered | undelivered; null until known
	DeliveryDetail *string            `json:"delivery_detail"` // the provider's own status and error code
	DeliveryAt     *time.Time         `json:"delivery_at"`
	// Problems names each time in the row that Go and JSON cannot carry
	// (infinity, a year past 9999), shown clamped into range instead.
	Problems []string `json:"problems,omitempty"`
}

// IntentColumns is the select list that ScanIntent reads, in its order.
const IntentColumns = `id, event_id, channel, payload, status, attempts, next_attempt_at, lease_expires_at,
	claimed_at, idempotency_key, provider_ref, last_error, ordering_key, occurred_at, created_at, updated_at,
	delivery, delivery_detail, delivery_at`

// ScanIntent reads one row selected with IntentColumns. A time that Go and
// JSON cannot carry does not fail the read: it is clamped and named in Problems.
func ScanIntent(row pgx.Row) (IntentRow, error) {
	var r IntentRow
	next, lease, claimed := looseTime{Field: "next_attempt_at"}, looseTime{Field: "lease_expires_at"}, looseTime{Field: "claimed_at"}
	occurred, created, updated := looseTime{Field: "occurred_at"}, looseTime{Field: "created_at"}, looseTime{Field: "updated_at"}
	delivery := looseTime{Field: "delivery_at"}
	err := row.Scan(&r.ID, &r.EventID, &r.Channel, &r.Payload, &r.Status, &r.Attempts, &next,
		&lease, &claimed, &r.IdempotencyKey, &r.ProviderRef, &r.LastError, &r.OrderingKey,
		&occurred, &created, &updated, &r.Delivery, &r.DeliveryDetail, &delivery)
	r.NextAttemptAt, r.LeaseExpiresAt, r.ClaimedAt = next.Time, lease.ptr(), claimed.ptr()
	r.OccurredAt, r.CreatedAt, r.UpdatedAt, r.DeliveryAt = occurred.ptr(), created.Time, updated.Time, delivery.ptr()
	r.Problems = problems(&next, &lease, &claimed, &occurred, &created, &updated, &delivery)
	return r, err
}

// Operation is one operator transition of an intent.
type Operation struct {
	IntentID    int64
	Event       statemachine.Event // Requeue, Cancel, ResolveSent, ResolveSend or ResolveSkip
	Actor       string             // who asks: a token name
	ProviderRef string             // for ResolveSent: the provider's reference of the effect
	Reason      string             // free text kept in the audit entry
	Snapshot    string             // the bulk snapshot the operation comes from, if any; kept in the audit entry
	// Expect, when set, applies the operation only if the intent is still in
	// this state with this many attempts (as a bulk snapshot froze it);
	// otherwise Operate returns a *ChangedError.
	Expect *Expected
	// Force sends again an intent that may have been applied although its
	// provider's key window has passed (see KeyWindow). It needs a Reason.
	Force bool
}

// Expected is the state an intent must still be in for an Operation to apply.
type Expected struct {
	Status   statemachine.State
	Attempts int
}

// ChangedError refuses an operation whose intent moved since it was selected.
type ChangedError struct {
	IntentID int64
	Was, Now Expected
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("%s: intent %d changed since it was selected (%s, %d attempts; now %s, %d attempts)",
		statemachine.ErrTransition, e.IntentID, e.Was.Status, e.Was.Attempts, e.Now.Status, e.Now.Attempts)
}

// Unwrap makes errors.Is(err, ErrTransition) true.
func (e *ChangedError) Unwrap() error { return statemachine.ErrTransition }

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

// operatorEvents are the events Operate applies.
var operatorEvents = map[statemachine.Event]bool{
	statemachine.Requeue:     true,
	statemachine.Cancel:      true,
	statemachine.ResolveSent: true,
	statemachine.ResolveSend: true,
	statemachine.ResolveSkip: true,
}

const (
	selectIntent = `SELECT ` + IntentColumns + ` FROM effectd.intents WHERE id = $1`

	// operateIntent is the fenced compare-and-set: it changes the row only if
	// nobody moved it since it was read, and never a SENDING row under a live lease.
	operateIntent = `
UPDATE effectd.intents SET
    status           = $4,
    next_attempt_at  = CASE WHEN $4 = 'PENDING' THEN now() ELSE next_attempt_at END,
    lease_expires_at = NULL,
    provider_ref     = coalesce($5, provider_ref),
    updated_at       = now()
WHERE id = $1 AND status = $2 AND attempts = $3
  AND NOT (status = 'SENDING' AND lease_expires_at > now())
RETURNING ` + IntentColumns

	insertOperatorAttempt = `
INSERT INTO effectd.attempts (intent_id, attempt, kind, started_at, finished_at, outcome, error, provider_ref)
VALUES ($1, $2, 'operator', now(), now(), $3, NULL, $4)`

	// maybeAppliedSQL reads what the key-window rule needs: the channel's
	// provider, the database's clock, and whether a call was ever made (a
	// SKIPPED row may have been applied if it was called before it was skipped).
	maybeAppliedSQL = `
SELECT coalesce((SELECT provider FROM effectd.channels WHERE name = $2), ''), now(),
       EXISTS (SELECT 1 FROM effectd.attempts WHERE intent_id = $1 AND kind IN ('send', 'lookup'))`

	insertAudit = `
INSERT INTO effectd.audit (actor, action, intent_id, channel, before, after, reason, bulk_snapshot)
VALUES ($1, $2, $3, $4, $5, $6, nullif($7, ''), nullif($8, '')::uuid)`
)

// auditState is the part of an intent that an audit entry records: not the
// payload, which may hold personal data.
type auditState struct {
	Status        statemachine.State `json:"status"`
	Attempts      int                `json:"attempts"`
	ProviderRef   *string            `json:"provider_ref"`
	NextAttemptAt time.Time          `json:"next_attempt_at"`
	Reason        string             `json:"reason,omitempty"`
	Snapshot      string             `json:"snapshot,omitempty"`
	Force         bool               `json:"force,omitempty"` // sent again past the key window on the operator's word
}

// Operate applies an operator event to an intent in one transaction: the state
// machine decides whether it is allowed, a fenced compare-and-set applies it,
// and an operator attempt and an audit entry record it. A refused or lost race
// returns an error wrapping ErrTransition with the current state; a missing
// intent returns ErrNotFound.
func Operate(ctx context.Context, pool *pgxpool.Pool, op Operation) (before, after IntentRow, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("dispatcher.Operate(%d, %s): %w", op.IntentID, op.Event, err)
		}
	}()
	if !operatorEvents[op.Event] {
		return before, after, fmt.Errorf("%w: %q is not an operator event", ErrInvalid, op.Event)
	}
	var ref *string
	if op.Event == statemachine.ResolveSent {
		if op.ProviderRef == "" {
			return before, after, fmt.Errorf("%w: provider_ref is required to resolve as sent", ErrInvalid)
		}
		ref = &op.ProviderRef
	}
	if op.Actor == "" {
		return before, after, fmt.Errorf("%w: actor is required", ErrInvalid)
	}
	// PostgreSQL's text and jsonb refuse these; refused here they are the
	// caller's mistake, not a failed statement.
	for _, f := range [...]struct{ name, value string }{{"actor", op.Actor}, {"provider_ref", op.ProviderRef}, {"reason", op.Reason}} {
		if !utf8.ValidString(f.value) || strings.IndexByte(f.value, 0) >= 0 {
			return before, after, fmt.Errorf("%w: %s: must be UTF-8 text without NUL bytes", ErrInvalid, f.name)
		}
	}
	if op.Force && op.Reason == "" {
		return before, after, fmt.Errorf("%w: reason: required with force", ErrInvalid)
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		return before, after, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))

	if before, err = readIntent(ctx, tx, op.IntentID); err != nil {
		return before, after, err
	}
	if x := op.Expect; x != nil && (before.Status != x.Status || before.Attempts != x.Attempts) {
		return before, after, &ChangedError{IntentID: op.IntentID, Was: *x, Now: Expected{before.Status, before.Attempts}}
	}
	to, err := statemachine.Next(before.Status, op.Event)
	if err != nil {
		return before, after, err
	}
	if to == statemachine.Pending && !op.Force {
		if err := checkKeyWindow(ctx, tx, before); err != nil {
			return before, after, err
		}
	}
	after, err = ScanIntent(tx.QueryRow(ctx, operateIntent, op.IntentID, before.Status, before.Attempts, to, ref))
	if errors.Is(err, pgx.ErrNoRows) {
		// Someone moved the row since we read it, or its lease is live: report what it is now.
		now, err := readIntent(ctx, tx, op.IntentID)
		if err != nil {
			return before, after, err
		}
		if now.Status == statemachine.Sending && now.Status == before.Status && now.Attempts == before.Attempts && now.LeaseExpiresAt != nil {
			return now, after, &LeaseError{IntentID: op.IntentID, Until: *now.LeaseExpiresAt}
		}
		return now, after, &statemachine.TransitionError{From: now.Status, Event: op.Event}
	}
	if err != nil {
		return before, after, err
	}

	if _, err := tx.Exec(ctx, insertOperatorAttempt, op.IntentID, before.Attempts, string(op.Event), ref); err != nil {
		return before, after, err
	}
	b, err := json.Marshal(snapshot(before, Operation{}))
	if err != nil {
		return before, after, err
	}
	a, err := json.Marshal(snapshot(after, op))
	if err != nil {
		return before, after, err
	}
	if _, err := tx.Exec(ctx, insertAudit, op.Actor, "intent."+string(op.Event), op.IntentID, after.Channel, b, a, op.Reason, op.Snapshot); err != nil {
		return before, after, err
	}
	if err := tx.Commit(ctx); err != nil {
		return before, after, err
	}
	return before, after, nil
}

func readIntent(ctx context.Context, tx pgx.Tx, id int64) (IntentRow, error) {
	r, err := ScanIntent(tx.QueryRow(ctx, selectIntent, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("intent %d: %w", id, ErrNotFound)
	}
	return r, err
}

// snapshot is what the audit records of r; op's reason and bulk snapshot go with the state after.
func snapshot(r IntentRow, op Operation) auditState {
	return auditState{Status: r.Status, Attempts: r.Attempts, ProviderRef: r.ProviderRef, NextAttemptAt: r.NextAttemptAt,
		Reason: op.Reason, Snapshot: op.Snapshot, Force: op.Force}
}

// checkKeyWindow refuses to send r again when it may have been applied (it is
// IN_DOUBT, stuck SENDING, or SKIPPED after a call) and its provider
// has forgotten its idempotency key. Ages are measured on the database's clock.
func checkKeyWindow(ctx context.Context, tx pgx.Tx, r IntentRow) error {
	if r.Status != statemachine.InDoubt && r.Status != statemachine.Sending && r.Status != statemachine.Skipped {
		return nil
	}
	var kind string
	var now time.Time
	var called bool
	if err := tx.QueryRow(ctx, maybeAppliedSQL, r.ID, r.Channel).Scan(&kind, &now, &called); err != nil {
		return err
	}
	if r.Status == statemachine.Skipped && !called {
		return nil // skipped before any call (max_age): nothing can have been applied
	}
	if !pastKeyWindow(kind, r.CreatedAt, now) {
		return nil
	}
	return &KeyWindowError{IntentID: r.ID, Status: r.Status, Age: now.Sub(r.CreatedAt), Window: KeyWindow(kind)}
}
