package intentdb

import (
	"context"

	"fmt"

	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/internal/query/harnessdb"
	"github.com/effectd/effectd/internal/query/querytest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// between returns the part of s from the first from up to the next to, or ""
// when from is not in s.
func between(s, from, to string) string {
	_, after, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	part, _, _ := strings.Cut(after, to)
	return from + part
}

// TestCompleteLooksUpByID: a completion batch finds its rows through the
// primary key even when the statistics say no row is SENDING, the state an
// ANALYZE leaves after a backlog was enqueued. Before migration 008 the
// planner read the whole of intents_lease for each batch instead, an entry for
// every row claimed since the last vacuum: half speed on a 100,000 backlog.
func TestCompleteLooksUpByID(t *testing.T) {
	plan := querytest.ExplainSeeded(t, func(tx pgx.Tx) { planBacklog(t, tx, 20000) }, []string{
		`ANALYZE effectd.intents`,
		`SET LOCAL plan_cache_mode = force_generic_plan`,
		`PREPARE complete_plan AS ` + completeSQL,
	}, `EXECUTE complete_plan('{1}', '{1}', '{SENT}', '{ref}', '{""}', '{now}', '{now}', '{now}', '{sent}', '{t}', '{""}', true, '{plan:evt-1}', now() - interval '1 minute', now(), '{0}')`)
	update := between(plan, "Update on intents", "CTE fenced")
	// each partition's primary key (which partitions are read is
	// TestCompleteKeepsGenericPlan's)
	if !strings.Contains(update, "_pkey") || strings.Contains(update, "_lease") {
		t.Fatalf("the completion's update does not look its rows up by id:\n%s", plan)
	}
}

// TestTakeExpiredUsesLeaseIndex: the reconciler still reads intents_lease, whose
// predicate migration 008 narrowed to rows with a lease.
func TestTakeExpiredUsesLeaseIndex(t *testing.T) {
	plan := querytest.Explain(t, []string{`SET LOCAL enable_seqscan = off`},
		takeExpiredSQL, 100, []string{"sms"}, pgtype.Interval{Microseconds: 60e6, Valid: true})
	if !strings.Contains(plan, "_lease") {
		t.Fatalf("the reconciler's plan does not use intents_lease:\n%s", plan)
	}
}

// TestPruneUsesItsIndex: the pruner's query can use intents_prunable (its
// status list implies the index's predicate), so pruning one channel reads no
// more than that channel's settled rows.
func TestPruneUsesItsIndex(t *testing.T) {
	plan := querytest.Explain(t, []string{`SET LOCAL enable_seqscan = off`},
		pruneSQL, "sms", 100, pgtype.Interval{Microseconds: 3600e6, Valid: true})
	if !strings.Contains(plan, "_prunable") {
		t.Fatalf("the prune plan does not use intents_prunable:\n%s", plan)
	}
}

// TestClaimKeepsGenericPlan: after five claims a connection runs the claim's
// generic plan, which reads intents_due in order, instead of planning each
// claim again over every partition and its indexes (a claim has no partition
// key to prune by): with a literal limit, a plan made for the values always
// looked cheaper than the generic one while rows were due, and every claim
// of a backlog was planned anew.
func TestClaimKeepsGenericPlan(t *testing.T) {
	ctx := context.Background()
	tx, err := pgtest.New(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	planBacklog(t, tx, 20000)
	for _, s := range []string{
		`ANALYZE effectd.intents`,
		`PREPARE claim_plan AS ` + claimSQL,
	} {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatalf("%.60s: %v", s, err)
		}
	}
	defer tx.Exec(ctx, `DEALLOCATE claim_plan`)
	for range 7 {
		if _, err := tx.Exec(ctx, `EXECUTE claim_plan('plan', '30 seconds', 10, 0, 0)`); err != nil {
			t.Fatal(err)
		}
	}
	var generic int64
	if err := tx.QueryRow(ctx, `SELECT generic_plans FROM pg_prepared_statements WHERE name = 'claim_plan'`).Scan(&generic); err != nil {
		t.Fatal(err)
	}
	if generic == 0 {
		t.Fatal("every claim was planned for its values: no generic plan after 7 claims")
	}
	rows, err := tx.Query(ctx, `EXPLAIN EXECUTE claim_plan('plan', '30 seconds', 10, 0, 0)`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	// the partition that holds the rows (the others are empty: their scans cost nothing)
	var part string
	if err := tx.QueryRow(ctx, `SELECT relname::text FROM pg_class WHERE oid = (SELECT tableoid FROM effectd.intents LIMIT 1)`).Scan(&part); err != nil {
		t.Fatal(err)
	}
	due, claimed := between(plan, "CTE due", "CTE claimed"), between(plan, "CTE claimed", "CTE spent")
	if !strings.Contains(due, part+"_due") || strings.Contains(due, "Seq Scan on "+part+" ") ||
		!strings.Contains(claimed, part+"_pkey") || strings.Contains(claimed, "Seq Scan on "+part+" ") {
		t.Fatalf("the claim's generic plan does not read intents_due, or finds the claimed rows otherwise than by id:\n%s", plan)
	}
}

// TestClaimReadsOnlyClaimedDays: with fifteen days of settled history, the
// claim's update looks its rows up in today's partition only; the other days'
// primary keys are pruned once the claimed rows are known. By id alone, every
// day's primary key was searched for every claimed id, a cost that grew with
// the number of day partitions retained.
func TestClaimReadsOnlyClaimedDays(t *testing.T) {
	h := onHistory(t, func(tx pgx.Tx) { planIntents(t, tx, 1000) },
		claimSQL, `('plan', '30 seconds', 10, 0, 0)`)
	if n := h.todaysKeysRead(t, between(h.plan, "CTE claimed", "CTE spent"), "the claim's update"); n != 1 {
		t.Fatalf("the claim's update did not find its rows through %s_pkey:\n%s", h.today, h.plan)
	}
}

// TestTakeExpiredReadsOnlyItsDays: the reconciler's poll keeps its generic
// plan (planned again over every day partition at each poll, it cost tens of
// milliseconds a second on an idle deployment with fifteen days of history)
// and looks the rows it takes up in their own day's partition only.
func TestTakeExpiredReadsOnlyItsDays(t *testing.T) {
	h := onHistory(t, func(tx pgx.Tx) {
		planIntents(t, tx, 1000, fixture.Status("SENDING"), fixture.Lease(time.Now().Add(-time.Minute)))
	}, takeExpiredSQL, `(10, '{plan}', '1 hour')`)
	if h.generic == 0 {
		t.Fatal("every poll was planned for its values: no generic plan after 7")
	}
	if n := h.todaysKeysRead(t, h.plan, "the poll's update"); n != 1 || !strings.Contains(h.plan, "_lease") {
		t.Fatalf("the poll did not read intents_lease and find its rows through %s_pkey:\n%s", h.today, h.plan)
	}
}

// TestCompleteKeepsGenericPlan: the completion of a batch keeps its generic
// plan and looks the batch's rows up in their own day's partition only. With
// its created_at bounds and arrays as plain parameters, a plan made for the
// values (pruned to one day, sized to the batch) always looked cheaper, so
// every batch was planned again over every day partition and its indexes: 1,327
// plans for 1,369 batches in a live run, each slower than the batch itself
// with seventeen partitions.
func TestCompleteKeepsGenericPlan(t *testing.T) {
	h := onHistory(t, func(tx pgx.Tx) {
		planIntents(t, tx, 5000, fixture.Status("SENDING"), fixture.Lease(time.Now().Add(time.Minute)))
	}, completeSQL, `('{1,2,3}', '{1,1,1}', '{SENT,SENT,SENT}', '{r,r,r}', '{"","",""}', '{now,now,now}', '{now,now,now}',
		 '{now,now,now}', '{sent,sent,sent}', '{t,t,t}', '{"","",""}', true, '{plan:evt-1,plan:evt-2,plan:evt-3}',
		 now() - interval '1 minute', now(), '{0,0,0}')`)
	if h.generic == 0 {
		t.Fatalf("every completion was planned for its values: no generic plan after 7\n%s", h.plan)
	}
	h.todaysKeysRead(t, h.plan, "the completion")
	if n := h.todaysKeysRead(t, between(h.plan, "CTE updated", "CTE fenced"), "the completion's update"); n != 1 {
		t.Fatalf("the completion's update did not find its rows through %s_pkey:\n%s", h.today, h.plan)
	}
}

// historyPlan is what onHistory returns: the plan of a statement's eighth run
// (EXPLAIN ANALYZE), how many of its runs had the generic plan, and today's
// intents partition, where the statement's rows are.
type historyPlan struct {
	plan, today string
	generic     int64
}

// onHistory makes fifteen day partitions holding 14,000 settled intents of
// channel plan, inserts today's rows with todays (event ids evt-1 …), prepares
// sql and runs it seven times with args (a parenthesised list), and returns
// the plan of an eighth run, in a transaction it rolls back.
func onHistory(t *testing.T, todays func(pgx.Tx), sql, args string) historyPlan {
	t.Helper()
	ctx := context.Background()
	tx, err := pgtest.New(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := harnessdb.DayPartitions(ctx, tx, 15); err != nil {
		t.Fatal(err)
	}
	fixture.AddChannel(t, tx, "plan", "webhook")
	now := time.Now()
	fixture.Intents(t, tx, 14000, func(n int) []fixture.IntentOption {
		return []fixture.IntentOption{fixture.Channel("plan"), fixture.Event(fmt.Sprintf("old-%d", n)), fixture.Status("SENT"),
			fixture.Attempts(0), fixture.CreatedAt(now.Add(-time.Duration(n%14+1) * 24 * time.Hour))}
	})
	todays(tx)
	for _, s := range []string{
		`ANALYZE effectd.intents`,
		`PREPARE on_history AS ` + sql,
	} {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatalf("%.60s: %v", s, err)
		}
	}
	defer tx.Exec(ctx, `DEALLOCATE on_history`)
	for range 7 {
		if _, err := tx.Exec(ctx, `EXECUTE on_history`+args); err != nil {
			t.Fatal(err)
		}
	}
	var h historyPlan
	if err := tx.QueryRow(ctx, `SELECT generic_plans FROM pg_prepared_statements WHERE name = 'on_history'`).Scan(&h.generic); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE on_history`+args)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	h.plan = strings.Join(lines, "\n")
	if err := tx.QueryRow(ctx, `SELECT relname::text FROM pg_class WHERE oid = (SELECT tableoid FROM effectd.intents WHERE event_id = 'evt-1')`).Scan(&h.today); err != nil {
		t.Fatal(err)
	}
	return h
}

// todaysKeysRead fails the test when section of the plan read another day's
// primary key than today's, and returns how many of today's it read.
func (h historyPlan) todaysKeysRead(t *testing.T, section, what string) (searched int) {
	t.Helper()
	for _, l := range strings.Split(section, "\n") {
		if !strings.Contains(l, "_pkey on intents_p") || strings.Contains(l, "never executed") {
			continue
		}
		if !strings.Contains(l, h.today+"_pkey") {
			t.Fatalf("%s searched another day's primary key than today's (%s):\n%s", what, h.today, h.plan)
		}
		searched++
	}
	return searched
}

// planBacklog makes channel "plan" (a webhook) and n PENDING intents of it,
// evt-1 to evt-n.
func planBacklog(t *testing.T, tx pgx.Tx, n int) {
	t.Helper()
	fixture.AddChannel(t, tx, "plan", "webhook")
	planIntents(t, tx, n)
}

// planIntents makes n intents of channel "plan", evt-1 to evt-n, with opts.
func planIntents(t *testing.T, tx pgx.Tx, n int, opts ...fixture.IntentOption) {
	t.Helper()
	fixture.Intents(t, tx, n, func(k int) []fixture.IntentOption {
		return append([]fixture.IntentOption{fixture.Channel("plan"), fixture.Event(fmt.Sprintf("evt-%d", k))}, opts...)
	})
}
