package operator_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/statemachine"
)

// seedTwoPerson registers channel refund (stripe, approval: two-person) and
// inserts an IN_DOUBT intent of event eventID on it.
func seedTwoPerson(t *testing.T, pool *pgxpool.Pool, eventID string) int64 {
	t.Helper()
	fixture.AddChannel(t, pool, "refund", "stripe", fixture.Policy(`{"approval": "two-person"}`), fixture.IfAbsent())
	return fixture.Intent(t, pool, fixture.Channel("refund"), fixture.Event(eventID), fixture.Status("IN_DOUBT"),
		fixture.Attempts(1)).ID
}

// twoPersonIntent reads an intent's status and attempts, and how many audit
// entries it has.
func twoPersonIntent(t *testing.T, pool *pgxpool.Pool, id int64) (status string, attempts, audits int) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `SELECT status, attempts, (SELECT count(*) FROM effectd.audit WHERE intent_id = $1)
		FROM effectd.intents WHERE id = $1`, id).Scan(&status, &attempts, &audits); err != nil {
		t.Fatal(err)
	}
	return status, attempts, audits
}

// requestSkip asks, as alice, to resolve intent id as skipped: refused as
// an operation of its own, recorded as a request.
func requestSkip(t *testing.T, pool *pgxpool.Pool, id int64, eventID string) effectdtype.ApprovalRequest {
	t.Helper()
	ctx := context.Background()
	op := operator.Operation{IntentID: id, EventID: eventID, Event: statemachine.ResolveSkip, Actor: "alice", Reason: "refunded by hand"}
	if _, _, err := operator.New(pool, storeOf(pool, effectdtype.SingleNode)).Operate(ctx, op); !errors.Is(err, operator.ErrApprovalRequired) {
		t.Fatalf("Operate on a two-person channel: %v, want ErrApprovalRequired", err)
	}
	a, err := operator.New(pool, nil).RequestOperation(ctx, op)
	if err != nil {
		t.Fatal(err)
	}
	if a.State != effectdtype.ApprovalPending || a.Requester != "alice" || a.Intent == nil || a.Intent.Status != "IN_DOUBT" ||
		a.Intent.EventID != eventID || a.Intent.IdempotencyKey != "refund:"+eventID || a.Channel != "refund" {
		t.Fatalf("request = %+v", a)
	}
	return a
}

// TestApprovalTwoPerson: on a two-person channel a resolve as skip is a
// request; its requester cannot approve it (nothing changes); another
// person's approval runs it through Operate's fenced, audited path, the audit
// naming both; a rejected request changes nothing.
func TestApprovalTwoPerson(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	id := seedTwoPerson(t, pool, "rf-1")
	a := requestSkip(t, pool, id, "rf-1")

	_, err := operator.New(pool, storeOf(pool, effectdtype.SingleNode)).Decide(ctx, operator.Decision{Request: a.ID, Decider: "alice", Approve: true, Reason: "mine"})
	if !errors.Is(err, operator.ErrSelfApproval) {
		t.Fatalf("self-approval: %v, want ErrSelfApproval", err)
	}
	if st, _, audits := twoPersonIntent(t, pool, id); st != "IN_DOUBT" || audits != 0 {
		t.Fatalf("after a refused self-approval: %s with %d audit entries", st, audits)
	}
	if got, _ := operator.New(pool, nil).GetApproval(ctx, a.ID); got.State != effectdtype.ApprovalPending {
		t.Fatalf("after a refused self-approval the request is %s", got.State)
	}

	got, err := operator.New(pool, storeOf(pool, effectdtype.SingleNode)).Decide(ctx, operator.Decision{Request: a.ID, Decider: "bob", Approve: true, Reason: "checked the dashboard"})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != effectdtype.ApprovalApproved || got.Decider == nil || *got.Decider != "bob" || got.Outcome == nil ||
		!strings.Contains(*got.Outcome, "IN_DOUBT → SKIPPED") {
		t.Fatalf("approved request = %+v", got)
	}
	var actor, after string
	if err := pool.QueryRow(ctx, `SELECT actor, after::text FROM effectd.audit WHERE intent_id = $1`, id).Scan(&actor, &after); err != nil {
		t.Fatal(err)
	}
	var entry struct {
		Status   string `json:"status"`
		Reason   string `json:"reason"`
		Approval struct {
			Request     int64  `json:"request"`
			RequestedBy string `json:"requested_by"`
			ApprovedBy  string `json:"approved_by"`
		} `json:"approval"`
	}
	if err := json.Unmarshal([]byte(after), &entry); err != nil {
		t.Fatal(err)
	}
	if actor != "bob" || entry.Status != "SKIPPED" || entry.Reason != "refunded by hand" || entry.Approval.Request != a.ID ||
		entry.Approval.RequestedBy != "alice" || entry.Approval.ApprovedBy != "bob" {
		t.Errorf("audit: actor %q, after %s; want bob, SKIPPED, requested by alice, approved by bob", actor, after)
	}
	if _, err := operator.New(pool, storeOf(pool, effectdtype.SingleNode)).Decide(ctx, operator.Decision{Request: a.ID, Decider: "carol", Approve: true, Reason: "again"}); !errors.Is(err, statemachine.ErrTransition) {
		t.Errorf("approving a decided request: %v, want ErrTransition", err)
	}

	id2 := seedTwoPerson(t, pool, "rf-2")
	b := requestSkip(t, pool, id2, "rf-2")
	if got, err := operator.New(pool, storeOf(pool, effectdtype.SingleNode)).Decide(ctx, operator.Decision{Request: b.ID, Decider: "bob", Reason: "not without the ledger"}); err != nil || got.State != effectdtype.ApprovalRejected {
		t.Fatalf("reject: %+v, %v", got, err)
	}
	if st, _, audits := twoPersonIntent(t, pool, id2); st != "IN_DOUBT" || audits != 0 {
		t.Errorf("after a rejection: %s with %d audit entries", st, audits)
	}
}

// TestApprovalMovedOn: an intent that moved on between the request and its
// approval (here retried by an operator, back to PENDING) is left as it is:
// the request fails with the reason, and no audit entry is written.
func TestApprovalMovedOn(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	id := seedTwoPerson(t, pool, "rf-1")
	a := requestSkip(t, pool, id, "rf-1")
	if _, _, err := operator.New(pool, storeOf(pool, effectdtype.SingleNode)).Operate(ctx, operator.Operation{IntentID: id, Event: statemachine.Requeue, Actor: "carol"}); err != nil {
		t.Fatal(err)
	}
	_, err := operator.New(pool, storeOf(pool, effectdtype.SingleNode)).Decide(ctx, operator.Decision{Request: a.ID, Decider: "bob", Approve: true, Reason: "ok"})
	var moved *operator.MovedOnError
	if !errors.As(err, &moved) || !errors.Is(err, statemachine.ErrTransition) {
		t.Fatalf("approval of a moved-on intent: %v, want a *MovedOnError", err)
	}
	if st, attempts, audits := twoPersonIntent(t, pool, id); st != "PENDING" || attempts != 1 || audits != 1 {
		t.Errorf("the intent after a refused approval: %s, %d attempts, %d audit entries; want PENDING, 1, 1 (the retry's)", st, attempts, audits)
	}
	got, _ := operator.New(pool, nil).GetApproval(ctx, a.ID)
	if got.State != effectdtype.ApprovalFailed || got.Outcome == nil || !strings.Contains(*got.Outcome, "changed since") {
		t.Errorf("request = %s, outcome %v; want failed, saying the intent changed", got.State, got.Outcome)
	}
}

// TestApprovalExpired: a request past its expiry cannot be approved; it is
// recorded expired and the intent is left as it is.
func TestApprovalExpired(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	id := seedTwoPerson(t, pool, "rf-1")
	a := requestSkip(t, pool, id, "rf-1")
	if _, err := pool.Exec(ctx, `UPDATE effectd.approval_requests SET created_at = now() - interval '2 days', expires_at = now() - interval '1 day' WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	if page, err := operator.New(pool, nil).PendingApprovals(ctx, nil, 0, 10); err != nil || len(page.Requests) != 0 {
		t.Errorf("pending after expiry: %+v, %v; want none", page, err)
	}
	_, err := operator.New(pool, storeOf(pool, effectdtype.SingleNode)).Decide(ctx, operator.Decision{Request: a.ID, Decider: "bob", Approve: true, Reason: "late"})
	if !errors.Is(err, operator.ErrExpired) {
		t.Fatalf("approving an expired request: %v, want ErrExpired", err)
	}
	if st, _, audits := twoPersonIntent(t, pool, id); st != "IN_DOUBT" || audits != 0 {
		t.Errorf("after a refused expired approval: %s with %d audit entries", st, audits)
	}
	if got, _ := operator.New(pool, nil).GetApproval(ctx, a.ID); got.State != effectdtype.ApprovalExpired || got.DecidedAt == nil {
		t.Errorf("request = %s, decided %v; want expired, recorded", got.State, got.DecidedAt)
	}
}

// TestApprovalPolicyChange: a two-person channel's policy changes only at
// another person's approval, audited with both; a second request made
// against the policy the first one changed fails, changing nothing.
func TestApprovalPolicyChange(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	seedTwoPerson(t, pool, "rf-1")
	mode := storeOf(pool, effectdtype.SingleNode)
	change := operator.PolicyChange{Channel: "refund", Actor: "alice", Patch: []byte(`{"approval": "none"}`)}
	if _, err := operator.New(pool, mode).ChangePolicy(ctx, change); !errors.Is(err, operator.ErrApprovalRequired) {
		t.Fatalf("ChangePolicy on a two-person channel: %v, want ErrApprovalRequired", err)
	}
	first, err := operator.New(pool, nil).RequestPolicyChange(ctx, change, "the pilot is over")
	if err != nil {
		t.Fatal(err)
	}
	second, err := operator.New(pool, nil).RequestPolicyChange(ctx, operator.PolicyChange{Channel: "refund", Actor: "alice", Patch: []byte(`{"max_attempts": 3}`)}, "fewer tries")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := operator.New(pool, mode).Decide(ctx, operator.Decision{Request: first.ID, Decider: "bob", Approve: true, Reason: "agreed"}); err != nil {
		t.Fatal(err)
	}
	ch, err := operator.New(pool, mode).GetChannel(ctx, "refund")
	if err != nil || ch.Policy.Approval != "none" {
		t.Fatalf("policy after approval: %+v, %v", ch.Policy, err)
	}
	var actor, after string
	if err := pool.QueryRow(ctx, `SELECT actor, after::text FROM effectd.audit WHERE action = 'channel.policy'`).Scan(&actor, &after); err != nil {
		t.Fatal(err)
	}
	if actor != "bob" || !strings.Contains(after, `"requested_by": "alice"`) {
		t.Errorf("audit of the policy change: %s %s; want bob, requested by alice", actor, after)
	}
	_, err = operator.New(pool, mode).Decide(ctx, operator.Decision{Request: second.ID, Decider: "bob", Approve: true, Reason: "agreed"})
	var moved *operator.MovedOnError
	if !errors.As(err, &moved) {
		t.Fatalf("approving a change made against an old policy: %v, want a *MovedOnError", err)
	}
	if ch, _ := operator.New(pool, mode).GetChannel(ctx, "refund"); ch.Policy.MaxAttempts == 3 {
		t.Errorf("the refused change was applied")
	}
}

// TestApprovalBulk: on a two-person channel a bulk action over the
// channel's threshold is a request; its approval applies the snapshot as
// the approver, and the audit names both; a snapshot that may span a
// two-person channel without naming it is refused, naming filter.channel.
func TestApprovalBulk(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	mode := storeOf(pool, effectdtype.SingleNode)
	a, b := seedTwoPerson(t, pool, "rf-1"), seedTwoPerson(t, pool, "rf-2")
	if _, err := pool.Exec(ctx, `UPDATE effectd.channels SET policy = '{"approval": "two-person", "approval_bulk_threshold": 1}' WHERE name = 'refund'`); err != nil {
		t.Fatal(err)
	}
	freeze := func(channel string) string {
		snap, err := operator.New(pool, nil).FreezeBulk(ctx, operator.BulkFreeze{Actor: "alice", Request: effectdtype.BulkRequest{Action: "retry",
			Reason: "the outage is over", Filter: effectdtype.BulkFilter{Channel: channel}}})
		if err != nil {
			t.Fatal(err)
		}
		return snap.Snapshot
	}
	if _, err := operator.New(pool, nil).BulkApproval(ctx, freeze(""), nil); !errors.Is(err, dispatcher.ErrInvalid) || !strings.Contains(err.Error(), "filter.channel") {
		t.Errorf("a snapshot across channels: %v, want ErrInvalid naming filter.channel", err)
	}
	snap := freeze("refund")
	need, err := operator.New(pool, nil).BulkApproval(ctx, snap, nil)
	if err != nil || need == nil || need.Rows != 2 || need.Channel != "refund" {
		t.Fatalf("BulkApproval of 2 rows over a threshold of 1: %+v, %v", need, err)
	}
	req, err := operator.New(pool, nil).RequestBulk(ctx, *need, "alice", "the outage is over")
	if err != nil {
		t.Fatal(err)
	}
	got, err := operator.New(pool, mode).Decide(ctx, operator.Decision{Request: req.ID, Decider: "bob", Approve: true, Reason: "agreed"})
	if err != nil || got.State != effectdtype.ApprovalApproved || got.Outcome == nil || !strings.Contains(*got.Outcome, "2 applied") {
		t.Fatalf("approved bulk: %+v, %v", got, err)
	}
	for _, id := range []int64{a, b} {
		if st, _, audits := twoPersonIntent(t, pool, id); st != "PENDING" || audits != 1 {
			t.Errorf("intent %d after the approved bulk retry: %s, %d audit entries", id, st, audits)
		}
	}
	var actor, requester string
	if err := pool.QueryRow(ctx, `SELECT actor, after -> 'approval' ->> 'requested_by' FROM effectd.audit WHERE action = 'bulk.apply'`).Scan(&actor, &requester); err != nil || actor != "bob" || requester != "alice" {
		t.Errorf("the bulk's audit entry: %q requested by %q (%v), want bob and alice", actor, requester, err)
	}
}
