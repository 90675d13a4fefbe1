package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query/accessdb"
	"github.com/effectd/effectd/internal/query/attemptdb"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/internal/query/readdb"
	"github.com/effectd/effectd/internal/storage"
	"github.com/effectd/effectd/statemachine"
)

// Operation is one operator transition of an intent.
type Operation struct {
	IntentID int64
	// EventID, when set, is the producer's event id of the intent the
	// operator was shown: the operation applies only to the intent with both
	// IntentID and EventID (an id is handed out again after a failover that
	// lost its enqueue), and returns ErrNotFound otherwise. Empty: it applies
	// to the intent IntentID names when the operation runs.
	EventID     string
	Event       statemachine.Event // Requeue, Cancel, ResolveSent, ResolveSend or ResolveSkip
	Actor       string             // who asks: a token name
	ProviderRef string             // for ResolveSent: the provider's reference of the effect
	Reason      string             // free text kept in the audit entry
	Snapshot    string             // the bulk snapshot the operation comes from, if any; kept in the audit entry
	// Expect, when set, applies the operation only if the intent is still in
	// this state with this many attempts (as a bulk snapshot froze it),
	// otherwise Operate returns a *ChangedError, and only if the intent with
	// IntentID still has the idempotency key frozen, otherwise ErrNotFound
	// (a failover that lost the intent handed its id to another).
	Expect *Expected
	// Force sends again an intent that may have been applied although its
	// provider's key window has passed (see KeyWindow). It needs a Reason.
	Force bool
	// approval, set when the operation runs at a two-person approval
	// (Decide), names the request and both people in the audit entry.
	approval *accessdb.AuditApproval
}

// Expected is the state an intent must still be in for an Operation to
// apply, and the idempotency key it must still have.
type Expected struct {
	Status   statemachine.State
	Attempts int
	Key      string
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

// MaxReason is the longest reason an operator may give, in bytes.
const MaxReason = 1000

// CheckReason refuses a reason over MaxReason bytes, or an empty one when required.
func CheckReason(reason string, required bool) error {
	switch {
	case required && strings.TrimSpace(reason) == "":
		return fmt.Errorf("%w: reason: required (1 to %d bytes): say why, for the audit", ErrInvalid, MaxReason)
	case len(reason) > MaxReason:
		return fmt.Errorf("%w: reason: longer than %d bytes", ErrInvalid, MaxReason)
	}
	return nil
}

// isText reports whether s is text PostgreSQL's text and jsonb take:
// UTF-8 without NUL bytes.
func isText(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

// operatorEvents are the events Operate applies.
var operatorEvents = map[statemachine.Event]bool{
	statemachine.Requeue:     true,
	statemachine.Cancel:      true,
	statemachine.ResolveSent: true,
	statemachine.ResolveSend: true,
	statemachine.ResolveSkip: true,
}

// Operate applies an operator event to an intent in one transaction: the state
// machine decides whether it is allowed, a fenced compare-and-set applies it,
// and an operator attempt and an audit entry record it. A refused or lost race
// returns an error wrapping ErrTransition with the current state; a missing
// intent returns ErrNotFound.
func (svc *Service) Operate(ctx context.Context, op Operation) (before, after effectdtype.IntentRow, err error) {
	defer func() {
		if err != nil {
			err = opError(err, "Operate(%d, %s)", op.IntentID, op.Event)
		}
	}()
	if _, err := op.check(); err != nil {
		return before, after, err
	}
	ctx, endSpan := dispatcher.OperatorSpan(ctx, svc.pool, string(op.Event), op.IntentID)
	defer func() { endSpan(err) }()
	tx, err := svc.pool.Begin(ctx)
	if err != nil {
		return before, after, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if before, after, err = operateIn(ctx, tx, svc.store, op); err != nil {
		return before, after, err
	}
	return before, after, tx.Commit(ctx)
}

// operateIn is Operate's work in the transaction tx, left uncommitted: the
// fences, the state machine, the two-person gate (ErrApprovalRequired), the
// key window, the compare-and-set, the operator attempt and the audit entry.
// A two-person approval (Decide) runs it in the transaction that records the
// approval.
func operateIn(ctx context.Context, tx pgx.Tx, store storage.Operator, op Operation) (before, after effectdtype.IntentRow, err error) {
	ref, err := op.check()
	if err != nil {
		return before, after, err
	}
	if before, err = readIntent(ctx, tx, op.IntentID); err != nil {
		return before, after, err
	}
	if op.EventID != "" && before.EventID != op.EventID {
		return before, after, fmt.Errorf("intent %d of event %q: %w (the id names the intent of event %q now)",
			op.IntentID, op.EventID, ErrNotFound, before.EventID)
	}
	if x := op.Expect; x != nil && before.IdempotencyKey != x.Key {
		return before, after, fmt.Errorf("intent %d of key %q: %w (the id names the intent of key %q now)",
			op.IntentID, x.Key, ErrNotFound, before.IdempotencyKey)
	}
	if x := op.Expect; x != nil && (before.Status != x.Status || before.Attempts != x.Attempts) {
		return before, after, &ChangedError{IntentID: op.IntentID, Was: *x, Now: Expected{Status: before.Status, Attempts: before.Attempts}}
	}
	to, err := statemachine.Next(before.Status, op.Event)
	if err != nil {
		return before, after, err
	}
	if err := op.refuseAlone(ctx, tx, before.Channel); err != nil {
		return before, after, err
	}
	if to == statemachine.Pending && !op.Force {
		if err := checkKeyWindow(ctx, tx, before); err != nil {
			return before, after, err
		}
	}
	after, err = store.Operate(ctx, tx, intentdb.Transition{IntentID: op.IntentID, Key: before.IdempotencyKey, From: before.Status, Attempts: before.Attempts,
		To: to, ProviderRef: ref})
	if errors.Is(err, pgx.ErrNoRows) {
		now, err := refused(ctx, tx, op, before)
		return now, after, err
	}
	if err != nil {
		return before, after, err
	}

	if err := store.RecordOperatorAttempt(ctx, tx, attemptdb.OperatorAttempt{IntentID: op.IntentID, Attempt: before.Attempts,
		Event: string(op.Event), ProviderRef: ref}); err != nil {
		return before, after, err
	}
	if err := accessdb.WriteAudit(ctx, tx, accessdb.Audit{Actor: op.Actor, Action: "intent." + string(op.Event),
		IntentID: op.IntentID, Channel: after.Channel, Before: accessdb.IntentAudit(before), After: accessdb.IntentAudit(after),
		Reason: op.Reason, Snapshot: op.Snapshot, Force: op.Force, Approval: op.approval}); err != nil {
		return before, after, err
	}
	return before, after, nil
}

// check refuses an operation the caller got wrong, naming the field, and
// returns the provider reference a resolve as sent records.
func (op Operation) check() (ref *string, err error) {
	if !operatorEvents[op.Event] {
		return nil, fmt.Errorf("%w: %q is not an operator event", ErrInvalid, op.Event)
	}
	if op.Event == statemachine.ResolveSent {
		if op.ProviderRef == "" {
			return nil, fmt.Errorf("%w: provider_ref is required to resolve as sent", ErrInvalid)
		}
		ref = &op.ProviderRef
	}
	if op.Actor == "" {
		return nil, fmt.Errorf("%w: actor is required", ErrInvalid)
	}
	// PostgreSQL's text and jsonb refuse these; refused here they are the
	// caller's mistake, not a failed statement.
	for _, f := range [...]struct{ name, value string }{{"actor", op.Actor}, {"provider_ref", op.ProviderRef}, {"reason", op.Reason}} {
		if !isText(f.value) {
			return nil, fmt.Errorf("%w: %s: must be UTF-8 text without NUL bytes", ErrInvalid, f.name)
		}
	}
	if op.Force && op.Reason == "" {
		return nil, fmt.Errorf("%w: reason: required with force", ErrInvalid)
	}
	return ref, nil
}

// refused says why op's compare-and-set changed nothing: someone moved the
// row since it was read as before, or its lease is live. It returns the row as
// it is now.
func refused(ctx context.Context, tx pgx.Tx, op Operation, before effectdtype.IntentRow) (effectdtype.IntentRow, error) {
	now, err := readIntent(ctx, tx, op.IntentID)
	if err != nil {
		return before, err
	}
	if now.Status == statemachine.Sending && now.Status == before.Status && now.Attempts == before.Attempts && now.LeaseExpiresAt != nil {
		return now, &dispatcher.LeaseError{IntentID: op.IntentID, Until: *now.LeaseExpiresAt}
	}
	return now, &statemachine.TransitionError{From: now.Status, Event: op.Event}
}

func readIntent(ctx context.Context, tx pgx.Tx, id int64) (effectdtype.IntentRow, error) {
	r, err := readdb.SelectIntent(ctx, tx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("intent %d: %w", id, ErrNotFound)
	}
	return r, err
}

// checkKeyWindow refuses to send r again when it may have been applied (it is
// IN_DOUBT, stuck SENDING, or SKIPPED after a call) and its provider
// has forgotten its idempotency key. Ages are measured on the database's clock.
func checkKeyWindow(ctx context.Context, tx pgx.Tx, r effectdtype.IntentRow) error {
	if r.Status != statemachine.InDoubt && r.Status != statemachine.Sending && r.Status != statemachine.Skipped {
		return nil
	}
	h, err := intentdb.MaybeApplied(ctx, tx, r.ID, r.Channel)
	if err != nil {
		return err
	}
	if r.Status == statemachine.Skipped && !h.Called {
		return nil // skipped before any call (max_age): nothing can have been applied
	}
	if !dispatcher.PastKeyWindow(h.Provider, r.CreatedAt, h.Now) {
		return nil
	}
	return &dispatcher.KeyWindowError{IntentID: r.ID, Status: r.Status, Age: h.Now.Sub(r.CreatedAt), Window: dispatcher.KeyWindow(h.Provider)}
}
