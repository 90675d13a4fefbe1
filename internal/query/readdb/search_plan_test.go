package readdb

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"

	"github.com/effectd/effectd/internal/pgtest"
)

// TestSearchKeepsItsPlan: on fourteen days of history, a search by event id,
// idempotency key or provider reference, and a list by event id, as
// ListIntents runs them on one connection, are planned at most five times and
// then keep their generic plan, which reads each day holding rows through the
// key's index, not row by row. Planned for its value at every call (an
// unnamed statement), a search was planned over every day partition and its
// fourteen indexes each time: about 2 ms against 0.1–0.2 ms of index probes,
// and more the more days held rows (issue 20: the fastest search 2.8–3.4
// times slower at 10 M retained intents than at 1 M).
func TestSearchKeepsItsPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 20,000 intents")
	}
	pool := pgtest.New(t)
	ctx := context.Background()
	seedHistory(t, pool, 1, 20_000) // h-<n> on channel hook, pay, sms for n % 3 = 0, 1, 2
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// the days holding most of a day's rows (about 1,430): how many there are
	// depends on the hour the test runs, as the seed counts back from now; a
	// day of a few hundred rows may rightly be read whole
	const fullDay = 1000
	rows, err := conn.Query(ctx, `SELECT tableoid::regclass::text FROM effectd.intents GROUP BY 1 HAVING count(*) >= $1`, fullDay)
	if err != nil {
		t.Fatal(err)
	}
	fullDays, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var s string
		err := r.Scan(&s)
		return strings.TrimPrefix(s, "effectd."), err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(fullDays) < 13 {
		t.Fatalf("%d days hold %d intents or more, want 13 or 14: %v", len(fullDays), fullDay, fullDays)
	}
	str := func(s string) *string { return &s }
	for _, c := range []struct {
		what  string
		f     effectdtype.IntentFilter
		want  string // the event id of the one intent found
		index string // the index each day is read through
	}{
		{"search: event id", effectdtype.IntentFilter{Search: str("h-78")}, "h-78", "_event_channel"},
		{"search: idempotency key", effectdtype.IntentFilter{Search: str("sms:h-80")}, "h-80", "_event_channel"},
		{"search: provider reference", effectdtype.IntentFilter{Search: str("ref-81")}, "h-81", "_provider_ref"},
		{"list: event id", effectdtype.IntentFilter{EventID: str("h-82")}, "h-82", "_event_channel"},
	} {
		c.f.Limit = 51
		for range 10 {
			var got []string
			if err := ListIntents(ctx, conn, c.f, func(it effectdtype.IntentRow) bool { got = append(got, it.EventID); return true }); err != nil {
				t.Fatalf("%s: %v", c.what, err)
			}
			if len(got) != 1 || got[0] != c.want {
				t.Fatalf("%s found %v, want [%s]", c.what, got, c.want)
			}
		}
		sql, args := intentList{IntentFilter: c.f}.statement()
		var name string
		var generic, custom int64
		err := conn.QueryRow(ctx, `SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1`, sql).
			Scan(&name, &generic, &custom)
		if errors.Is(err, pgx.ErrNoRows) {
			t.Fatalf("%s: not a prepared statement: planned for its value at every call\n%s", c.what, sql)
		}
		if err != nil {
			t.Fatal(err)
		}
		if custom > 5 || generic < 5 {
			t.Fatalf("%s: %d custom plans and %d runs of the generic plan in 10 calls, want at most 5 and at least 5", c.what, custom, generic)
		}
		plan := explainExecute(t, conn.Conn(), name, args)
		for _, day := range fullDays {
			if !strings.Contains(plan, day+c.index+" ") {
				t.Fatalf("%s: the generic plan did not read %s (%d rows or more) through %s:\n%s", c.what, day, fullDay, c.index, plan)
			}
		}
		if regexp.MustCompile(`Rows Removed by Filter: \d{4}`).MatchString(plan) {
			t.Fatalf("%s: the generic plan filtered a day's rows one by one:\n%s", c.what, plan)
		}
	}
	// a key with a rare status among a scope's channels: the scope one
	// condition, not a read per channel (h-3000 is a FAILED hook intent)
	for scope, want := range map[string]int{"hook,pay": 1, "pay,sms": 0} {
		f := effectdtype.IntentFilter{Limit: 51, Search: str("h-3000"), Status: str("FAILED"), Channels: strings.Split(scope, ",")}
		var got []string
		if err := ListIntents(ctx, conn, f, func(it effectdtype.IntentRow) bool { got = append(got, it.EventID); return true }); err != nil {
			t.Fatal(err)
		}
		if len(got) != want {
			t.Fatalf("a FAILED search among %s found %v, want %d intents", scope, got, want)
		}
	}
}

// explainExecute returns the plan of prepared statement name run with args
// (int64 and string only), as EXPLAIN ANALYZE shows it.
func explainExecute(t *testing.T, conn *pgx.Conn, name string, args []any) string {
	t.Helper()
	lits := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case int64:
			lits[i] = strconv.FormatInt(v, 10)
		case string:
			lits[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		default:
			t.Fatalf("argument %d of %s: %T", i+1, name, a)
		}
	}
	return pgtest.Plan(t, conn, fmt.Sprintf(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE %s(%s)`,
		pgx.Identifier{name}.Sanitize(), strings.Join(lits, ", ")))
}
