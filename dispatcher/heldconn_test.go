package dispatcher_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/providers/sandbox"
	"github.com/effectd/effectd/providers/webhook"
)

// TestDispatchStatementsRunOnHeldConnections: the claims, completions and the
// wake-up flag run on the few connections the dispatcher's services hold, so
// each is planned on those alone, never on the pool the API and producers
// share. Concurrent producers keep several batches in flight; afterwards no
// connection of the shared pool has run one of those statements last, and at
// most Completers+2 held connections exist.
func TestDispatchStatementsRunOnHeldConnections(t *testing.T) {
	t.Parallel()
	const (
		events    = 600
		producers = 6
		secret    = "whsec_ZWZmZWN0ZC10ZXN0LXNlY3JldC1rZXktMTIzNA=="
	)
	sb := sandbox.New(sandbox.Options{WebhookSecret: secret})
	srv := httptest.NewServer(sb.Handler())
	defer srv.Close()
	wh, err := webhook.New(webhook.Config{URL: srv.URL + "/hooks/held", Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	pool := pgtest.New(t)
	ctx := context.Background()
	pol := policy.Default("webhook")
	pol.Concurrency = 32
	d := run(t, pool, dispatcher.Config{Channels: []dispatcher.Channel{{Name: "hook", Kind: "webhook", Provider: wh, Policy: pol}}})

	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range events / producers {
				_, err := dispatcher.Enqueue(ctx, pool, dispatcher.Intent{EventID: fmt.Sprintf("held-%d-%d", p, i),
					Channel: "hook", Payload: map[string]any{"n": i}})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// The test's own reads run on a connection of their own: on one of the
	// shared pool's, they would replace the last query a backend shows.
	watch, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	eventually(t, 60*time.Second, "every intent SENT", func() bool {
		var n int
		watch.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE status = 'SENT'`).Scan(&n)
		return n == events
	})

	// The statements' first lines (pg_stat_activity keeps a query's first
	// kilobyte, and each begins with its header comment).
	dispatch := map[string]string{
		"claim":                 "-- Claim up to $3 due PENDING intents",
		"completion":            "-- Applies a batch of dispatcher outcomes",
		"wake-up flag":          "-- Sets effectd.wakeup.waiting",
		"taking expired leases": "-- Takes up to $1 SENDING intents",
	}
	rows, err := watch.Query(ctx, `SELECT pid, application_name, query FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	held, ranHeld := 0, 0
	for rows.Next() {
		var pid int
		var app, q string
		if err := rows.Scan(&pid, &app, &q); err != nil {
			t.Fatal(err)
		}
		isHeld := strings.HasSuffix(app, dispatcher.HeldSuffix)
		if isHeld {
			held++
		}
		for name, head := range dispatch {
			if !strings.Contains(q, head) {
				continue
			}
			if !isHeld {
				t.Errorf("backend %d (application_name %q) of the shared pool ran the %s last", pid, app, name)
			} else {
				ranHeld++
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if most := dispatcher.ConfigOf(d).Completers + 2; held > most {
		t.Errorf("%d held connections, want at most %d (completers + claimer + reconciler)", held, most)
	}
	if ranHeld == 0 {
		t.Error("no held connection ran a dispatch statement last")
	}
}

// TestHeldConnectionsPlanGenerically: on one PostgreSQL the held connections
// plan generically from the first run (their statements keep the generic plan
// anyway, and the five plans for values before it each cover every day
// partition); in the distributed mode Citus keeps its own choice; a URL that
// sets plan_cache_mode is obeyed.
func TestHeldConnectionsPlanGenerically(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		cfg  dispatcher.Config
		url  string
		want string
	}{
		{"one PostgreSQL", dispatcher.Config{}, "", "force_generic_plan"},
		{"distributed mode", dispatcher.Config{Buckets: 8}, "", "auto"},
		{"set in the URL", dispatcher.Config{}, "force_custom_plan", "force_custom_plan"},
	} {
		p := pool
		if c.url != "" {
			cfg := pool.Config()
			cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = c.url
			var err error
			if p, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			defer p.Close()
		}
		got, err := dispatcher.HeldSetting(ctx, p, c.cfg, "plan_cache_mode")
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s: plan_cache_mode %s, want %s", c.name, got, c.want)
		}
		app, err := dispatcher.HeldSetting(ctx, p, c.cfg, "application_name")
		if err != nil || !strings.HasSuffix(app, dispatcher.HeldSuffix) {
			t.Errorf("%s: application_name %q (%v), want it to end with %q", c.name, app, err, dispatcher.HeldSuffix)
		}
	}
}

// TestHeldPlansReadIndexesAsTheDayFills: a held connection keeps the plan it
// made first, and today's partition may be empty then (a fresh deployment, or
// every midnight's new day). That plan must still read the day through its
// indexes once the day holds thousands of rows. Planned on an empty partition,
// a sequential scan of it looked cheapest, and the claim then read the whole
// day at every claim (8 ms at 8,000 rows in a live run at 1,000/s, the
// claimer busy most of the time) until an ANALYZE made PostgreSQL plan again.
func TestHeldPlansReadIndexesAsTheDayFills(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	ctx := context.Background()
	conn := heldConn(t, pool)
	p := intentdb.ClaimParams{Channel: "hook", Lease: 30 * time.Second, Limit: 10}
	if _, _, err := intentdb.Claim(ctx, conn, p); err != nil {
		t.Fatal(err)
	}
	// The day fills: 20,000 intents, 5 of them due.
	now := time.Now()
	fixture.Intents(t, pool, 20000, func(n int) []fixture.IntentOption {
		due := now.Add(time.Hour)
		if n <= 5 {
			due = now.Add(-time.Second)
		}
		return []fixture.IntentOption{fixture.Event(fmt.Sprintf("fill-%d", n)), fixture.Channel("hook"), fixture.NextAttemptAt(due)}
	})
	var name string
	if err := conn.QueryRow(ctx, `SELECT name FROM pg_prepared_statements
		WHERE statement LIKE '-- Claim up to%' AND generic_plans > 0`).Scan(&name); err != nil {
		t.Fatalf("the claim's generic plan on the held connection: %v", err)
	}
	plan := pgtest.Plan(t, conn, `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE `+name+`('hook', '30 seconds', 10, 0, 0)`)
	if !strings.Contains(plan, "rows=5 ") {
		t.Fatalf("the claim did not take the 5 due intents:\n%s", plan)
	}
	if strings.Contains(plan, "Seq Scan on intents_") {
		t.Fatalf("the claim planned on an empty day reads the full day row by row:\n%s", plan)
	}
}

// TestHeldConnectionsCompileNothing: a statement the held connections run
// that must scan a table (the notify trigger's read of the one-row channels
// table) is not compiled by PostgreSQL's JIT. With sequential scans off its
// estimate carries the planner's disable cost, above jit_above_cost: on a
// connection with only that setting the same read is compiled, which took
// about 50 ms of every claim and completion, on a pool whose URL leaves jit on.
func TestHeldConnectionsCompileNothing(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	ctx := context.Background()
	var available bool
	if err := pool.QueryRow(ctx, `SELECT pg_jit_available()`).Scan(&available); err != nil {
		t.Fatal(err)
	}
	if !available {
		t.Skip("this PostgreSQL has no JIT compiler: nothing to keep off")
	}
	const read = `EXPLAIN (ANALYZE, TIMING OFF) SELECT NOT EXISTS (SELECT 1 FROM effectd.channels WHERE notify IS NOT NULL)`
	plain, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Release()
	if _, err := plain.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	if plan := pgtest.Plan(t, plain, read); !strings.Contains(plan, "JIT:") {
		t.Fatalf("with sequential scans off and jit on, the read was not compiled; the test shows nothing here:\n%s", plan)
	}

	conn := heldConn(t, pool)
	if plan := pgtest.Plan(t, conn, read); strings.Contains(plan, "JIT:") {
		t.Fatalf("a held connection compiles a one-row read:\n%s", plan)
	}
}

// heldConn returns a connection of the pool a dispatcher on pool holds its
// connections from, released, and that pool closed, when the test ends.
func heldConn(t *testing.T, pool *pgxpool.Pool) *pgxpool.Conn {
	t.Helper()
	ctx := context.Background()
	held, err := dispatcher.HeldPool(ctx, pool, dispatcher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(held.Close)
	conn, err := held.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	return conn
}
