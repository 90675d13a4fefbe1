package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/internal/query/accessdb"
	"github.com/effectd/effectd/internal/query/channeldb"
	"github.com/effectd/effectd/internal/storage"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/statemachine"
)

// Errors of two-person approval.
var (
	// ErrApprovalRequired refuses to run alone an action that the channel's
	// policy (approval: two-person) hands to a second person: ask for it
	// with RequestOperation, RequestPolicyChange or RequestBulk instead.
	ErrApprovalRequired = errors.New("approval required")
	// ErrSelfApproval refuses a decision on one's own request.
	ErrSelfApproval = errors.New("self-approval")
	// ErrExpired refuses a decision on a request whose time ran out.
	ErrExpired = errors.New("expired")
)

// MovedOnError refuses an approved action whose intent or channel moved on
// since the request: the request is failed with Why as its outcome, and
// nothing else changed. It wraps ErrTransition.
type MovedOnError struct {
	Request int64
	Why     string
}

func (e *MovedOnError) Error() string {
	return fmt.Sprintf("%s: approval request %d failed, nothing changed: %s", statemachine.ErrTransition, e.Request, e.Why)
}

// Unwrap makes errors.Is(err, ErrTransition) true.
func (e *MovedOnError) Unwrap() error { return statemachine.ErrTransition }

// needsApproval reports whether op, run alone (not at an approval nor as a
// row of a bulk action, which is gated as a whole), needs a second person on
// a channel with policy p: on a two-person channel, a resolve as sent or as
// skipped (failed), and anything forced past the provider's key window.
func (op Operation) needsApproval(p policy.Policy) bool {
	return p.TwoPerson() && op.mayNeedApproval()
}

// mayNeedApproval reports whether op could need a second person on some
// channel, before its channel's policy is read.
func (op Operation) mayNeedApproval() bool {
	return op.approval == nil && op.Snapshot == "" &&
		(op.Event == statemachine.ResolveSent || op.Event == statemachine.ResolveSkip || op.Force)
}

// refuseAlone refuses, with ErrApprovalRequired, an operation that channel's
// policy hands to a second person; it reads the policy only for an
// operation that may need one. An unregistered channel needs none.
func (op Operation) refuseAlone(ctx context.Context, tx pgx.Tx, channel string) error {
	if !op.mayNeedApproval() {
		return nil
	}
	p, err := channelPolicy(ctx, tx, channel)
	if errors.Is(err, ErrNotFound) || err == nil && !op.needsApproval(p) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: channel %q's policy says approval: two-person: %s needs another person's approval; ask for it with a reason (the admin API turns the request into an approval request)",
		ErrApprovalRequired, channel, op.Event)
}

// channelPolicy reads channel's effective policy; ErrNotFound when it is not registered.
func channelPolicy(ctx context.Context, db query.DB, channel string) (policy.Policy, error) {
	c, err := channeldb.SelectChannel(ctx, db, channel)
	if errors.Is(err, pgx.ErrNoRows) {
		return policy.Policy{}, fmt.Errorf("channel %q: %w", truncate(channel, 64), ErrNotFound)
	}
	if err != nil {
		return policy.Policy{}, err
	}
	return policy.Effective(c.Provider, c.Policy, c.Override)
}

// intentParams are the parameters of an intent's approval request.
type intentParams struct {
	ProviderRef string `json:"provider_ref,omitempty"`
	Force       bool   `json:"force,omitempty"`
}

// RequestOperation records op, which the intent's channel hands to a second
// person (ErrApprovalRequired from Operate), as a pending approval request
// by op.Actor: the intent as it is now (status, attempts, idempotency key,
// fenced on op.EventID as Operate fences) is what the approval will act on.
// It needs a reason, and refuses an operation the intent cannot take now.
func (svc *Service) RequestOperation(ctx context.Context, op Operation) (a effectdtype.ApprovalRequest, err error) {
	defer func() {
		if err != nil {
			err = opError(err, "RequestOperation(%d, %s)", op.IntentID, op.Event)
		}
	}()
	if _, err := op.check(); err != nil {
		return a, err
	}
	if err := CheckReason(op.Reason, true); err != nil {
		return a, err
	}
	tx, err := svc.pool.Begin(ctx)
	if err != nil {
		return a, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	r, err := readIntent(ctx, tx, op.IntentID)
	if err != nil {
		return a, err
	}
	if op.EventID != "" && r.EventID != op.EventID {
		return a, fmt.Errorf("intent %d of event %q: %w (the id names the intent of event %q now)", op.IntentID, op.EventID, ErrNotFound, r.EventID)
	}
	if _, err := statemachine.Next(r.Status, op.Event); err != nil {
		return a, err
	}
	p, err := channelPolicy(ctx, tx, r.Channel)
	if err != nil {
		return a, err
	}
	if !op.needsApproval(p) {
		return a, fmt.Errorf("%w: channel %q runs %s without approval: take the action itself", ErrInvalid, r.Channel, op.Event)
	}
	params, err := json.Marshal(intentParams{ProviderRef: op.ProviderRef, Force: op.Force})
	if err != nil {
		return a, err
	}
	target := &effectdtype.ApprovalTarget{ID: r.ID, EventID: r.EventID, Status: string(r.Status), Attempts: r.Attempts, IdempotencyKey: r.IdempotencyKey}
	return insertApproval(ctx, tx, accessdb.NewApproval{Channel: r.Channel, Action: "intent." + string(op.Event), Requester: op.Actor,
		Reason: op.Reason, Intent: target, Parameters: params, Expiry: time.Duration(p.ApprovalExpiry)})
}

// insertApproval records a, after marking expired the channel's requests
// whose time ran out, and commits tx; it returns the request as stored.
func insertApproval(ctx context.Context, tx pgx.Tx, a accessdb.NewApproval) (effectdtype.ApprovalRequest, error) {
	if !isText(a.Requester) || !isText(a.Reason) {
		return effectdtype.ApprovalRequest{}, fmt.Errorf("%w: reason: must be UTF-8 text without NUL bytes", ErrInvalid)
	}
	if err := accessdb.ExpireApprovals(ctx, tx, a.Channel); err != nil {
		return effectdtype.ApprovalRequest{}, err
	}
	id, err := accessdb.InsertApproval(ctx, tx, a)
	if err != nil {
		return effectdtype.ApprovalRequest{}, err
	}
	out, err := accessdb.SelectApproval(ctx, tx, id)
	if err != nil {
		return out, err
	}
	return out, tx.Commit(ctx)
}

// GetApproval returns approval request id; ErrNotFound when there is none.
func (svc *Service) GetApproval(ctx context.Context, id int64) (effectdtype.ApprovalRequest, error) {
	a, err := accessdb.SelectApproval(ctx, svc.pool, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, fmt.Errorf("approval request %d: %w", id, ErrNotFound)
	}
	return a, err
}

// MaxApprovalPage is the most requests one page of PendingApprovals holds.
const MaxApprovalPage = 500

// PendingApprovals returns up to limit (at most MaxApprovalPage) pending,
// unexpired requests of channels (nil: every channel) after id after, oldest
// first; it reads only pending requests, however many decided ones are kept.
func (svc *Service) PendingApprovals(ctx context.Context, channels []string, after int64, limit int) (effectdtype.ApprovalPage, error) {
	limit = min(max(limit, 1), MaxApprovalPage)
	list, err := accessdb.PendingApprovals(ctx, svc.pool, channels, after, limit+1)
	if err != nil {
		return effectdtype.ApprovalPage{}, fmt.Errorf("pending approvals: %w", err)
	}
	page := effectdtype.ApprovalPage{Requests: list}
	if len(list) > limit {
		page.Requests, page.Next = list[:limit], list[limit-1].ID
	}
	if page.Requests == nil {
		page.Requests = []effectdtype.ApprovalRequest{}
	}
	return page, nil
}

// Decision is a second person's decision on an approval request.
type Decision struct {
	Request int64
	Decider string // the principal's name: the audit's actor
	Approve bool   // false: reject
	Reason  string // required
	// Sees reports whether the decider sees a channel (nil: every channel);
	// a bulk action applies only within it, as ApplyBulk does.
	Sees func(channel string) bool
}

// Decide approves or rejects a pending approval request. The decider may
// never be its requester (ErrSelfApproval, checked on the locked request in
// the transaction that decides it, and by the statement that records the
// decision); an expired request is marked expired and refused (ErrExpired);
// one decided already is ErrTransition. At approval the action runs, in the
// same transaction as the request's state change, through the path a direct
// action takes (Operate's, ChangePolicy's), fenced on what the requester was
// shown; if the intent or channel moved on, the request is marked failed
// with the reason and Decide returns a *MovedOnError, nothing else changed.
// A bulk action is applied after its approval commits (RequestBulk).
func (svc *Service) Decide(ctx context.Context, d Decision) (a effectdtype.ApprovalRequest, err error) {
	defer func() {
		if err != nil {
			err = opError(err, "Decide(%d)", d.Request)
		}
	}()
	if err := checkDecision(d); err != nil {
		return a, err
	}
	tx, err := svc.pool.Begin(ctx)
	if err != nil {
		return a, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if a, err = lockPending(ctx, tx, d); err != nil {
		return a, err
	}
	if !d.Approve {
		return record(ctx, tx, accessdb.Decision{ID: a.ID, State: effectdtype.ApprovalRejected, Decider: &d.Decider, Reason: d.Reason, Outcome: "rejected"})
	}
	if a.Action == actionBulk {
		return svc.approveBulk(ctx, tx, a, d)
	}
	outcome, runErr := runApproved(ctx, tx, svc.store, a, d)
	if runErr != nil {
		tx.Rollback(context.WithoutCancel(ctx))
		return svc.failApproval(ctx, a, d, runErr)
	}
	return record(ctx, tx, accessdb.Decision{ID: a.ID, State: effectdtype.ApprovalApproved, Decider: &d.Decider, Reason: d.Reason, Outcome: outcome})
}

// checkDecision refuses a decision the caller got wrong, naming the field.
func checkDecision(d Decision) error {
	if d.Decider == "" {
		return fmt.Errorf("%w: actor is required", ErrInvalid)
	}
	if err := CheckReason(d.Reason, true); err != nil {
		return err
	}
	if !isText(d.Reason) || !isText(d.Decider) {
		return fmt.Errorf("%w: reason: must be UTF-8 text without NUL bytes", ErrInvalid)
	}
	return nil
}

// lockPending locks request d.Request and refuses a decision on it: missing
// (ErrNotFound), decided, the decider's own (ErrSelfApproval) or expired
// (ErrExpired, after recording it expired, committed).
func lockPending(ctx context.Context, tx pgx.Tx, d Decision) (effectdtype.ApprovalRequest, error) {
	a, err := accessdb.LockApproval(ctx, tx, d.Request)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, fmt.Errorf("approval request %d: %w", d.Request, ErrNotFound)
	}
	if err != nil {
		return a, err
	}
	if a.Requester == d.Decider {
		return a, fmt.Errorf("%w: approval request %d was made by %q, who may not decide it: another person with the approve right on channel %q must",
			ErrSelfApproval, a.ID, a.Requester, a.Channel)
	}
	switch a.State {
	case effectdtype.ApprovalPending:
		return a, nil
	case effectdtype.ApprovalExpired:
		if a.DecidedAt == nil { // read as expired, not yet recorded so
			if _, err := accessdb.DecideApproval(ctx, tx, accessdb.Decision{ID: a.ID, State: effectdtype.ApprovalExpired,
				Outcome: "expired undecided at " + a.ExpiresAt.UTC().Format(time.RFC3339)}); err != nil {
				return a, err
			}
			if err := tx.Commit(ctx); err != nil {
				return a, err
			}
		}
		return a, fmt.Errorf("%w: approval request %d expired at %s undecided: ask again", ErrExpired, a.ID, a.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return a, fmt.Errorf("%w: approval request %d is %s already", statemachine.ErrTransition, a.ID, a.State)
}

// record writes decision x on the locked request in tx, commits, and
// returns the request as it is afterwards.
func record(ctx context.Context, tx pgx.Tx, x accessdb.Decision) (effectdtype.ApprovalRequest, error) {
	ok, err := accessdb.DecideApproval(ctx, tx, x)
	if err != nil {
		return effectdtype.ApprovalRequest{}, err
	}
	if !ok { // the statement's own fence: pending, and not the requester's
		return effectdtype.ApprovalRequest{}, fmt.Errorf("%w: approval request %d is no longer pending", statemachine.ErrTransition, x.ID)
	}
	a, err := accessdb.SelectApproval(ctx, tx, x.ID)
	if err != nil {
		return a, err
	}
	return a, tx.Commit(ctx)
}

// failApproval records approval request a failed, by d's decider, with
// why's text, in a transaction of its own (the action's rolled back), and
// returns why as a *MovedOnError; an error that is not the intent's or
// channel's having moved on is returned as it is, the request left pending.
func (svc *Service) failApproval(ctx context.Context, a effectdtype.ApprovalRequest, d Decision, why error) (effectdtype.ApprovalRequest, error) {
	if !movedOn(why) {
		return a, why
	}
	msg := message(why)
	tx, err := svc.pool.Begin(context.WithoutCancel(ctx))
	if err != nil {
		return a, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if a, err = record(context.WithoutCancel(ctx), tx, accessdb.Decision{ID: a.ID, State: effectdtype.ApprovalFailed,
		Decider: &d.Decider, Reason: d.Reason, Outcome: msg}); err != nil {
		return a, err
	}
	return a, &MovedOnError{Request: a.ID, Why: msg}
}

// movedOn reports whether err says the approved action's subject moved on
// since the request: its intent changed state, attempts or key, or names
// another event, or its channel's policy changed.
func movedOn(err error) bool {
	return errors.Is(err, statemachine.ErrTransition) || errors.Is(err, ErrNotFound) || errors.Is(err, errPolicyMoved)
}

// message is err's text without the operations it passed through.
func message(err error) string {
	var op *OpError
	if errors.As(err, &op) {
		return op.Err.Error()
	}
	return err.Error()
}

// The actions of approval requests that are not an intent's event.
const (
	actionBulk   = "bulk.apply"
	actionPolicy = "channel.policy"
)

// runApproved runs approved request a's action in tx, by d's decider, and
// says what it did.
func runApproved(ctx context.Context, tx pgx.Tx, store storage.Operator, a effectdtype.ApprovalRequest, d Decision) (string, error) {
	approval := &accessdb.AuditApproval{Request: a.ID, RequestedBy: a.Requester, ApprovedBy: d.Decider}
	if a.Action == actionPolicy {
		return approvePolicy(ctx, tx, store, a, approval)
	}
	t := a.Intent
	if t == nil || !strings.HasPrefix(a.Action, "intent.") {
		return "", fmt.Errorf("approval request %d: unknown action %q", a.ID, a.Action)
	}
	var params intentParams
	if err := json.Unmarshal(a.Parameters, &params); err != nil {
		return "", fmt.Errorf("approval request %d: parameters: %w", a.ID, err)
	}
	op := Operation{IntentID: t.ID, EventID: t.EventID, Event: statemachine.Event(strings.TrimPrefix(a.Action, "intent.")),
		Actor: d.Decider, ProviderRef: params.ProviderRef, Reason: a.Reason, Force: params.Force, approval: approval,
		Expect: &Expected{Status: statemachine.State(t.Status), Attempts: t.Attempts, Key: t.IdempotencyKey}}
	before, after, err := operateIn(ctx, tx, store, op)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("intent %d: %s → %s", t.ID, before.Status, after.Status), nil
}
