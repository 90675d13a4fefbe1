package chaos

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/providers/sandbox"
)

// The rules of the producers' cancels (verbs.go). A cancel that answered
// CANCELLED to its producer moved a PENDING intent to CANCELLED, a state no
// worker, callback or provider event leaves:
//   - the intent is CANCELLED at the end, unless an operator action named it
//     (decisions.touched): anything else is a later write that was not fenced
//     out (invariant 3);
//   - it holds no provider effect, unless one of its attempts was ambiguous
//     (a call that may have been applied: maybe_sent, in_doubt, a retry after
//     a call, a lookup) or its lease expired: a PENDING row holds an effect
//     only after such an attempt. An effect without one means the cancel
//     took a row that was in flight or sent (invariant 1).
//
// The audit entry a cancel writes (intent.cancel) names its intent
// (decisions.named, judgeHistory). And an intent CANCELLED that no cancel
// of the history (a producer's, whatever its answer, or an operator action)
// named is lost without a recorded decision (invariant 4).
const (
	ruleCancelLeft   = "cancel answered CANCELLED to its producer, then the intent was left (a later write not fenced out)"
	ruleCancelEffect = "effect on an intent its producer cancelled (answered CANCELLED) after no ambiguous attempt and no expired lease"
	ruleCancelNone   = "lost: CANCELLED, and no cancel or operator action in the history named it"
)

// ambiguousSQL lists, of the intents $1, those with an attempt after which
// the provider may hold the effect while the row is PENDING again: a call
// whose answer was not a clean one (maybe_sent, in_doubt, a retry after a
// call), a lookup (it follows such a call, an expired lease or an
// operator's reconcile), or a lease that expired.
const ambiguousSQL = `SELECT DISTINCT intent_id FROM effectd.attempts
WHERE intent_id = ANY($1::bigint[])
  AND (kind = 'lookup' OR outcome IN ('maybe_sent', 'in_doubt') OR outcome LIKE '%lease expired%'
       OR (kind = 'send' AND outcome = 'retry' AND coalesce(error, '') NOT LIKE '%not called%'))`

// judgeCancels flags what became of the intents their producers cancelled
// (events: the producers' log; Outcome.Cancelled) against the final intents,
// the ledger's effects and the operators' decisions in ops.
func judgeCancels(ctx context.Context, pool *pgxpool.Pool, events map[string]Outcome, ops []Op, intents []harnessdb.IntentTally, ledger sandbox.Snapshot) ([]Violation, error) {
	byEvent := map[target]harnessdb.IntentTally{}
	for _, in := range intents {
		byEvent[target{in.Channel, in.EventID}] = in
	}
	dec := decide(ops)
	bad := map[[2]string][]string{}
	for _, in := range intents {
		if t := (target{in.Channel, in.EventID}); in.Status == "CANCELLED" && !dec.named[t] {
			bad[[2]string{ruleCancelNone, t.channel}] = append(bad[[2]string{ruleCancelNone, t.channel}], t.event)
		}
	}
	var cancelled []harnessdb.IntentTally
	var ids []int64
	for ev, o := range events {
		if in, ok := byEvent[target{o.Channel, ev}]; ok && o.Cancelled {
			cancelled = append(cancelled, in)
			ids = append(ids, in.ID)
		}
	}
	if len(cancelled) == 0 {
		return sortedViolations(bad), nil
	}
	rows, err := pool.Query(ctx, ambiguousSQL, ids)
	if err != nil {
		return nil, fmt.Errorf("chaos: reading the cancelled intents' attempts: %w", err)
	}
	ambiguous, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("chaos: reading the cancelled intents' attempts: %w", err)
	}
	excused := map[int64]bool{}
	for _, id := range ambiguous {
		excused[id] = true
	}
	applied := map[target]int{}
	for _, e := range ledger.Effects {
		if t, ok := effectTarget(e); ok {
			applied[t] += e.Applied
		}
	}
	for _, in := range cancelled {
		t := target{in.Channel, in.EventID}
		if in.Status != "CANCELLED" && !dec.touched[t] {
			bad[[2]string{ruleCancelLeft, t.channel}] = append(bad[[2]string{ruleCancelLeft, t.channel}], fmt.Sprintf("%s (%s)", t.event, in.Status))
		}
		if applied[t] > 0 && !excused[in.ID] {
			bad[[2]string{ruleCancelEffect, t.channel}] = append(bad[[2]string{ruleCancelEffect, t.channel}], fmt.Sprintf("%s (%s, applied %d)", t.event, in.Status, applied[t]))
		}
	}
	return sortedViolations(bad), nil
}
