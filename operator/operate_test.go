package operator_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/statemachine"
)

// seedIntent inserts an intent straight into the table in the given state,
// with an expired lease when SENDING unless liveLease.
func seedIntent(t *testing.T, pool *pgxpool.Pool, eventID string, s statemachine.State, liveLease bool) int64 {
	t.Helper()
	fixture.AddChannel(t, pool, "hook", "webhook", fixture.IfAbsent())
	opts := []fixture.IntentOption{fixture.Channel("hook"), fixture.Event(eventID), fixture.Status(string(s)), fixture.Attempts(3)}
	if s == statemachine.Sending {
		lease := time.Now().Add(-time.Minute)
		if liveLease {
			lease = time.Now().Add(time.Hour)
		}
		opts = append(opts, fixture.Lease(lease))
	}
	return fixture.Intent(t, pool, opts...).ID
}

func TestOperateTransitions(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	tests := []struct {
		name  string
		from  statemachine.State
		op    operator.Operation
		want  statemachine.State
		error error
	}{
		{"requeue failed", statemachine.Failed, operator.Operation{Event: statemachine.Requeue}, statemachine.Pending, nil},
		{"cancel pending", statemachine.Pending, operator.Operation{Event: statemachine.Cancel}, statemachine.Cancelled, nil},
		{"cancel sent", statemachine.Sent, operator.Operation{Event: statemachine.Cancel}, "", statemachine.ErrTransition},
		{"resolve sent", statemachine.InDoubt, operator.Operation{Event: statemachine.ResolveSent, ProviderRef: "re_1"}, statemachine.Sent, nil},
		{"resolve sent without ref", statemachine.InDoubt, operator.Operation{Event: statemachine.ResolveSent}, "", dispatcher.ErrInvalid},
		{"resolve send stuck sending", statemachine.Sending, operator.Operation{Event: statemachine.ResolveSend}, statemachine.Pending, nil},
		{"resolve skip", statemachine.InDoubt, operator.Operation{Event: statemachine.ResolveSkip, Reason: "customer refunded by hand"}, statemachine.Skipped, nil},
		{"not an operator event", statemachine.Pending, operator.Operation{Event: statemachine.Claim}, "", dispatcher.ErrInvalid},
	}
	for i, tt := range tests {
		id := seedIntent(t, pool, "ev-"+string(rune('a'+i)), tt.from, false)
		tt.op.IntentID, tt.op.Actor = id, "alice"
		before, after, err := operator.New(pool, storeOf(pool, effectdtype.SingleNode)).Operate(ctx, tt.op)
		if tt.error != nil {
			if !errors.Is(err, tt.error) {
				t.Errorf("%s: err = %v, want %v", tt.name, err, tt.error)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if before.Status != tt.from || after.Status != tt.want {
			t.Errorf("%s: %s -> %s, want %s -> %s", tt.name, before.Status, after.Status, tt.from, tt.want)
		}
		if after.LeaseExpiresAt != nil || after.Attempts != before.Attempts {
			t.Errorf("%s: lease %v attempts %d, want no lease and attempts unchanged", tt.name, after.LeaseExpiresAt, after.Attempts)
		}
		var attempts, audits int
		if err := pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM effectd.attempts WHERE intent_id = $1 AND kind = 'operator' AND outcome = $2),
			(SELECT count(*) FROM effectd.audit WHERE intent_id = $1 AND actor = 'alice' AND after->>'status' = $3)`,
			id, string(tt.op.Event), string(tt.want)).Scan(&attempts, &audits); err != nil {
			t.Fatal(err)
		}
		if attempts != 1 || audits != 1 {
			t.Errorf("%s: %d operator attempts and %d audit rows, want 1 and 1", tt.name, attempts, audits)
		}
	}
}

func TestOperateNotFound(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	_, _, err := operator.New(pool, storeOf(pool, effectdtype.SingleNode)).Operate(context.Background(), operator.Operation{IntentID: 42, Event: statemachine.Cancel, Actor: "a"})
	if !errors.Is(err, dispatcher.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}

// TestOperateRefusesUnstorableText: text PostgreSQL cannot hold is ErrInvalid
// naming the field, not a failed statement, and changes nothing.
func TestOperateRefusesUnstorableText(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	id := seedIntent(t, pool, "odd", statemachine.InDoubt, false)
	for _, op := range []operator.Operation{
		{IntentID: id, Event: statemachine.ResolveSent, Actor: "a", ProviderRef: "re_\x00"},
		{IntentID: id, Event: statemachine.ResolveSkip, Actor: "a", Reason: "why\x00"},
		{IntentID: id, Event: statemachine.ResolveSkip, Actor: "a\xff", Reason: "why"},
	} {
		_, _, err := operator.New(pool, storeOf(pool, effectdtype.SingleNode)).Operate(context.Background(), op)
		if !errors.Is(err, dispatcher.ErrInvalid) || !strings.Contains(err.Error(), "without NUL") {
			t.Errorf("%+v: err = %v, want ErrInvalid", op, err)
		}
	}
	var status string
	pool.QueryRow(context.Background(), `SELECT status FROM effectd.intents WHERE id = $1`, id).Scan(&status)
	if status != "IN_DOUBT" {
		t.Errorf("status %s after refused operations", status)
	}
}

func TestOperateLiveLeaseRefused(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	id := seedIntent(t, pool, "live", statemachine.Sending, true)
	_, _, err := operator.New(pool, storeOf(pool, effectdtype.SingleNode)).Operate(context.Background(), operator.Operation{IntentID: id, Event: statemachine.ResolveSend, Actor: "a"})
	var le *dispatcher.LeaseError
	if !errors.As(err, &le) || !errors.Is(err, statemachine.ErrTransition) {
		t.Fatalf("err = %v, want a LeaseError wrapping ErrTransition", err)
	}
}

// TestOperateRace races a resolve against a requeue of the same IN_DOUBT
// intent: exactly one wins and the other is refused with the winner's state.
func TestOperateRace(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	for round := range 20 {
		id := seedIntent(t, pool, "race-"+string(rune('a'+round)), statemachine.InDoubt, false)
		ops := []operator.Operation{
			{IntentID: id, Event: statemachine.ResolveSent, ProviderRef: "re_race", Actor: "alice"},
			{IntentID: id, Event: statemachine.Requeue, Actor: "bob"},
		}
		errs := make([]error, len(ops))
		afters := make([]effectdtype.IntentRow, len(ops))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, op := range ops {
			wg.Go(func() {
				<-start
				_, afters[i], errs[i] = operator.New(pool, storeOf(pool, effectdtype.SingleNode)).Operate(ctx, op)
			})
		}
		close(start)
		wg.Wait()

		winner, loser := 0, 1
		if errs[0] != nil {
			winner, loser = 1, 0
		}
		if errs[winner] != nil {
			t.Fatalf("round %d: both failed: %v; %v", round, errs[0], errs[1])
		}
		var te *statemachine.TransitionError
		if !errors.As(errs[loser], &te) {
			t.Fatalf("round %d: loser err = %v, want a TransitionError", round, errs[loser])
		}
		if te.From != afters[winner].Status {
			t.Errorf("round %d: loser saw state %s, want the winner's %s", round, te.From, afters[winner].Status)
		}
		var audits int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.audit WHERE intent_id = $1`, id).Scan(&audits); err != nil {
			t.Fatal(err)
		}
		if audits != 1 {
			t.Errorf("round %d: %d audit rows, want 1", round, audits)
		}
	}
}
