package query

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectd/effectd/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestCompleteLooksUpByID: a completion batch finds its rows through the
// primary key even when the statistics say no row is SENDING, the state an
// ANALYZE leaves after a backlog was enqueued. Before migration 008 the
// planner read the whole of intents_lease for each batch instead, an entry for
// every row claimed since the last vacuum: half speed on a 100,000 backlog.
func TestCompleteLooksUpByID(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, sql := range []string{
		`INSERT INTO effectd.channels (name, provider) VALUES ('plan', 'webhook')`,
		`INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key)
		 SELECT 'evt-' || n, 'plan', '{}', 'plan:evt-' || n FROM generate_series(1, 20000) n`,
		`ANALYZE effectd.intents`,
		`SET LOCAL plan_cache_mode = force_generic_plan`,
		`PREPARE complete_plan AS ` + completeSQL,
	} {
		if _, err := tx.Exec(ctx, sql); err != nil {
			t.Fatalf("%.60s: %v", sql, err)
		}
	}
	defer tx.Exec(ctx, `DEALLOCATE complete_plan`)
	rows, err := tx.Query(ctx, `EXPLAIN EXECUTE complete_plan('{1}', '{1}', '{SENT}', '{ref}', '{""}',
		'{now}', '{now}', '{now}', '{sent}', '{t}', '{""}')`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(lines, "\n")
	update := all[strings.Index(all, "Update on intents"):]
	update = update[:strings.Index(update, "CTE recorded")]
	if !strings.Contains(update, "intents_pkey") || strings.Contains(update, "intents_lease") {
		t.Fatalf("the completion's update does not look its rows up by id:\n%s", all)
	}
}

// TestTakeExpiredUsesLeaseIndex: the reconciler still reads intents_lease, whose
// predicate migration 008 narrowed to rows with a lease.
func TestTakeExpiredUsesLeaseIndex(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `EXPLAIN `+TakeExpired, 100, []string{"sms"}, pgtype.Interval{Microseconds: 60e6, Valid: true})
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if all := strings.Join(lines, "\n"); !strings.Contains(all, "intents_lease") {
		t.Fatalf("the reconciler's plan does not use intents_lease:\n%s", all)
	}
}
