//go:build citus

package dispatcher_test

import (
	"context"
	"errors"
	"testing"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/statemachine"
)

// TestCitusApproval: in the distributed mode a two-person channel's resolve
// is a request kept on the coordinator; its requester cannot approve it;
// another person's approval settles the intent on its bucket's shard in the
// transaction that records the approval, audited with both people; an
// intent that moved on since its request is left as it is.
func TestCitusApproval(t *testing.T) {
	const buckets = 4
	pool := citusPool(t, buckets)
	ctx := context.Background()
	fixture.AddChannel(t, pool, "c", "twilio", fixture.Policy(`{"approval": "two-person"}`))
	ids := map[string]int64{}
	for i, ev := range []string{"approved", "moved"} {
		citusProduce(t, pool, buckets, i+1, ev)
		var id int64
		if err := pool.QueryRow(ctx, `UPDATE effectd.intents SET status = 'IN_DOUBT', attempts = 1 WHERE event_id = $1 RETURNING id`, ev).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[ev] = id
	}
	mode := storeOf(pool, effectdtype.Citus)
	request := func(ev string) effectdtype.ApprovalRequest {
		op := operator.Operation{IntentID: ids[ev], EventID: ev, Event: statemachine.ResolveSkip, Actor: "alice", Reason: "refunded by hand"}
		if _, _, err := operator.New(pool, mode).Operate(ctx, op); !errors.Is(err, operator.ErrApprovalRequired) {
			t.Fatalf("Operate on a two-person channel: %v", err)
		}
		a, err := operator.New(pool, nil).RequestOperation(ctx, op)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	status := func(ev string) (st string, audits int) {
		if err := pool.QueryRow(ctx, `SELECT status FROM effectd.intents WHERE id = $1`, ids[ev]).Scan(&st); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.audit WHERE intent_id = $1`, ids[ev]).Scan(&audits); err != nil {
			t.Fatal(err)
		}
		return st, audits
	}

	a := request("approved")
	if _, err := operator.New(pool, mode).Decide(ctx, operator.Decision{Request: a.ID, Decider: "alice", Approve: true, Reason: "mine"}); !errors.Is(err, operator.ErrSelfApproval) {
		t.Fatalf("self-approval: %v", err)
	}
	if got, err := operator.New(pool, mode).Decide(ctx, operator.Decision{Request: a.ID, Decider: "bob", Approve: true, Reason: "checked"}); err != nil || got.State != effectdtype.ApprovalApproved {
		t.Fatalf("approval: %+v, %v", got, err)
	}
	var actor, requester string
	if err := pool.QueryRow(ctx, `SELECT actor, after -> 'approval' ->> 'requested_by' FROM effectd.audit WHERE intent_id = $1`, ids["approved"]).Scan(&actor, &requester); err != nil {
		t.Fatal(err)
	}
	if st, _ := status("approved"); st != "SKIPPED" || actor != "bob" || requester != "alice" {
		t.Errorf("approved intent %s, audit by %q requested by %q; want SKIPPED, bob, alice", st, actor, requester)
	}

	b := request("moved")
	if _, _, err := operator.New(pool, mode).Operate(ctx, operator.Operation{IntentID: ids["moved"], Event: statemachine.Requeue, Actor: "carol"}); err != nil {
		t.Fatal(err)
	}
	_, err := operator.New(pool, mode).Decide(ctx, operator.Decision{Request: b.ID, Decider: "bob", Approve: true, Reason: "ok"})
	var moved *operator.MovedOnError
	if !errors.As(err, &moved) {
		t.Fatalf("approval of a moved-on intent: %v", err)
	}
	if st, audits := status("moved"); st != "PENDING" || audits != 1 {
		t.Errorf("moved-on intent: %s with %d audit entries, want PENDING with the retry's alone", st, audits)
	}
	var dist string
	if err := pool.QueryRow(ctx, `SELECT coalesce((SELECT partmethod::text FROM pg_dist_partition WHERE logicalrelid = 'effectd.approval_requests'::regclass), 'local')`).Scan(&dist); err != nil || dist != "local" {
		t.Errorf("approval_requests in the distributed mode: %s (%v), want a coordinator table", dist, err)
	}
}
