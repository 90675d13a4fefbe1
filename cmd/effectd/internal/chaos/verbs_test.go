package chaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/providers/sandbox"
)

// TestJudgeCancels: of the intents their producers cancelled (answered
// CANCELLED), the checker flags one left CANCELLED no more with no operator
// action on it (invariant 3) and one holding an effect after no ambiguous
// attempt and no expired lease (invariant 1), and excuses an effect after an
// attempt that may have applied it, a lookup, or an expired lease, and a
// state an operator changed; a CANCELLED intent no cancel of the history
// named is lost (invariant 4).
func TestJudgeCancels(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.New(t)
	intents := map[string]string{ // event → final status
		"evt-1": "CANCELLED", // no effect: holds
		"evt-2": "CANCELLED", // an effect after a clean send: the cancel took a sent row
		"evt-3": "CANCELLED", // an effect after a maybe_sent call: excused
		"evt-4": "CANCELLED", // an effect after an expired lease: excused
		"evt-5": "SENT",      // left CANCELLED, no operator
		"evt-6": "PENDING",   // left CANCELLED, an operator retried it
		"evt-7": "CANCELLED", // an effect after a retry that called: excused
		"evt-8": "CANCELLED", // no cancel in the history: lost
	}
	fixture.AddChannel(t, pool, "hook", "webhook")
	ids := map[string]int64{}
	for _, ev := range slices.Sorted(maps.Keys(intents)) {
		ids[ev] = fixture.Intent(t, pool, fixture.Event(ev), fixture.Channel("hook"), fixture.Status(intents[ev]),
			fixture.Attempts(0)).ID
	}
	attempts := []struct{ ev, kind, outcome, err string }{
		{"evt-2", "send", "sent", ""},
		{"evt-3", "send", "maybe_sent", "EOF"},
		{"evt-4", "send", "lease expired", "no outcome recorded before the lease expired"},
		{"evt-7", "send", "retry", "webhook: 502"},
		{"evt-2", "send", "retry", "the lease was nearly over before the call started; not called"},
	}
	for _, a := range attempts {
		fixture.AddAttempts(t, pool, fixture.Attempt{IntentID: ids[a.ev], Kind: a.kind, Outcome: a.outcome, Error: a.err})
	}
	events := map[string]Outcome{}
	var ledger sandbox.Snapshot
	for ev := range intents {
		events[ev] = Outcome{Channel: "hook", Committed: true, Inserted: 1, Cancelled: ev != "evt-8"}
		if ev == "evt-2" || ev == "evt-3" || ev == "evt-4" || ev == "evt-7" {
			ledger.Effects = append(ledger.Effects, sandbox.Effect{Kind: "webhook", Key: ev, Ref: ev, Applied: 1,
				Body: []byte(fmt.Sprintf(`{"event":%q}`, ev))})
		}
	}
	ops := []Op{{At: time.Now(), Actor: "operator", Action: actRetry, Channel: "hook", Event: "evt-6", Result: "ok"}}
	for ev := range intents {
		if ev != "evt-8" {
			ops = append(ops, Op{At: time.Now(), Actor: "producer", Action: actCancel, Channel: "hook", Event: ev, Result: "ok, CANCELLED", Detail: "CANCELLED"})
		}
	}
	tallies, err := harnessdb.TallyIntents(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := judgeCancels(ctx, pool, events, ops, tallies, ledger)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, v := range vs {
		got[invariantOf(v.Rule)] = append(got[invariantOf(v.Rule)], v.Keys...)
	}
	want := map[string][]string{InvOwnIntent: {"evt-5 (SENT)"}, InvOneEffect: {"evt-2 (CANCELLED, applied 1)"}, InvNothingLost: {"evt-8"}}
	if len(got) != len(want) || !slices.Equal(got[InvOwnIntent], want[InvOwnIntent]) || !slices.Equal(got[InvOneEffect], want[InvOneEffect]) ||
		!slices.Equal(got[InvNothingLost], want[InvNothingLost]) {
		t.Fatalf("violations by invariant: %v, want %v (%+v)", got, want, vs)
	}
}

// TestJudgeHistoryNamesProducerCancels: the audit entry a producer's cancel
// writes is on an intent the history names; the same entry on an intent no
// one named is flagged.
func TestJudgeHistoryNamesProducerCancels(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.New(t)
	fixture.AddChannel(t, pool, "hook", "webhook")
	for _, ev := range []string{"evt-1", "evt-2"} {
		id := fixture.Intent(t, pool, fixture.Event(ev), fixture.Channel("hook"), fixture.Status("CANCELLED"), fixture.Attempts(0)).ID
		fixture.AddAudit(t, pool, fixture.AuditEntry{Actor: "producer", Action: "intent.cancel", IntentID: id, Channel: "hook",
			Reason: "cancelled"})
	}
	tallies, err := harnessdb.TallyIntents(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	ops := []Op{{At: time.Now(), Actor: "producer", Action: actCancel, Channel: "hook", Event: "evt-1", Result: "ok, CANCELLED", Detail: "CANCELLED"}}
	vs, err := judgeHistory(ctx, pool, ops, nil, tallies)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || !slices.Equal(vs[0].Keys, []string{"evt-2"}) || invariantOf(vs[0].Rule) != InvOwnIntent {
		t.Fatalf("violations: %+v, want the audit entry of evt-2 alone, under %q", vs, InvOwnIntent)
	}
}

// TestPlanVerbs: the plan puts every delivery in one transaction once; a
// batch enqueues through enqueue_many, holds each event once, shares one
// fate and isolation level, and spans at most batchGap; some transactions
// are batches of several, and some events are cancelled, some of them
// scheduled; on Citus a batch holds one bucket's deliveries.
func TestPlanVerbs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	ds := planActors(rand.New(rand.NewPCG(1, 3)), plan(rng, 400, 10*time.Second, CheckChannels))
	groups, cancels := planVerbs(rand.New(rand.NewPCG(1, 9)), ds, 0)
	n, several := 0, 0
	for _, g := range groups {
		events := map[string]bool{}
		for _, d := range g {
			n++
			if events[d.eventID] || (len(g) > 1 && !d.many) || d.rollback != g[0].rollback || d.iso != g[0].iso || d.at-g[0].at > batchGap {
				t.Fatalf("a batch that breaks the plan: %+v", g)
			}
			events[d.eventID] = true
		}
		if len(g) > 1 {
			several++
		}
	}
	if n != len(ds) {
		t.Fatalf("%d deliveries in the transactions, %d planned", n, len(ds))
	}
	scheduled := 0
	for _, d := range ds {
		if d.notBefore > 0 {
			scheduled++
		}
	}
	if several == 0 || len(cancels) == 0 || scheduled == 0 {
		t.Fatalf("batches of several %d, cancels %d, scheduled deliveries %d: want some of each", several, len(cancels), scheduled)
	}
	// on Citus a batch stays on its first's bucket
	onCitus, _ := planVerbs(rand.New(rand.NewPCG(1, 9)), ds, 32)
	for _, g := range onCitus {
		for _, d := range g {
			if bucketOf(d.eventID, 32) != bucketOf(g[0].eventID, 32) {
				t.Fatalf("a batch across buckets on Citus: %+v", g)
			}
		}
	}
}
