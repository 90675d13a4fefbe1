package query

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/pgtest"
)

// seedHistory adds n settled intents spread over the 14 days before an hour
// ago, over three channels, each with the attempt that sent it: mostly SENT
// and delivered, one in 3,000 FAILED, one in 500 undelivered, as an import
// would write them (already settled, counted by migration 012's insert
// trigger); then folds the counts, as the dispatcher's folder does.
func seedHistory(t *testing.T, pool *pgxpool.Pool, from, n int) {
	t.Helper()
	ctx := context.Background()
	if from == 1 {
		// a partition per day, as a deployment that ran 15 days has them
		if err := DayPartitions(ctx, pool, 15); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{
		`INSERT INTO effectd.channels (name, provider) VALUES ('hook', 'webhook'), ('pay', 'stripe'), ('sms', 'twilio')
		 ON CONFLICT DO NOTHING`,
		fmt.Sprintf(`INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key, status, attempts,
		     provider_ref, delivery, created_at, updated_at)
		 SELECT 'h-' || g, ch, '{"to":"+15550000000"}', ch || ':h-' || g,
		        CASE WHEN g %% 3000 = 0 THEN 'FAILED' ELSE 'SENT' END, 1,
		        CASE WHEN g %% 3000 = 0 THEN NULL ELSE 'ref-' || g END,
		        CASE WHEN g %% 3000 = 0 THEN NULL WHEN g %% 500 = 0 AND ch <> 'hook' THEN 'undelivered' ELSE 'delivered' END,
		        at, at
		 FROM generate_series(%d, %d) g,
		      LATERAL (SELECT (ARRAY['hook', 'pay', 'sms'])[1 + g %% 3] AS ch,
		                      now() - interval '1 hour' - (%d - g) * (interval '14 days' / %d) AS at) x`,
			from, from+n-1, from+n, from+n),
		fmt.Sprintf(`INSERT INTO effectd.attempts (intent_id, attempt, started_at, finished_at, outcome, provider_ref)
		 SELECT id, 1, created_at, created_at, 'sent', provider_ref FROM effectd.intents
		 WHERE event_id LIKE 'h-%%' AND id > (SELECT coalesce(max(intent_id), 0) FROM effectd.attempts)`),
		`INSERT INTO effectd.id_marks (at, max_id) SELECT now() - interval '50 minutes', max(id) FROM effectd.intents
		 ON CONFLICT DO NOTHING`,
		`INSERT INTO effectd.provider_events (provider, event_id, channel, intent_id, object_ref, type, outcome, payload, received_at)
		 SELECT 'twilio', provider_ref || ':delivered', channel, id, provider_ref, 'delivered', 'applied', '{}', created_at
		 FROM effectd.intents
		 WHERE channel = 'sms' AND provider_ref IS NOT NULL AND event_id LIKE 'h-%'
		   AND id > (SELECT coalesce(max(intent_id), 0) FROM effectd.provider_events)`,
		`INSERT INTO effectd.provider_events (provider, event_id, channel, object_ref, type, outcome, payload)
		 SELECT 'twilio', 'orphan-' || g || '-' || (SELECT count(*) FROM effectd.provider_events), 'sms', 'SMx', 'delivered', 'orphan', '{}'
		 FROM generate_series(1, 2) g`,
		`VACUUM ANALYZE effectd.provider_events`,
		foldCountsSQL,
		`VACUUM ANALYZE effectd.intent_count_deltas`,
		`VACUUM ANALYZE effectd.intents`,
		`VACUUM ANALYZE effectd.attempts`,
	} {
		if _, err := pool.Exec(ctx, s); err != nil {
			t.Fatalf("%.60s: %v", s, err)
		}
	}
}

// flatRead is one read an operator or Prometheus makes.
type flatRead struct {
	name   string
	sql    string
	args   []any
	list   *IntentFilter // a list: ListIntents's statement, after its id mark
	events *EventFilter  // a list of provider events: ListEvents's statement
}

// flatReads are the reads whose cost must not grow with history.
func flatReads() []flatRead {
	str := func(s string) *string { return &s }
	recent := time.Now().Add(-30 * time.Minute)
	empty := time.Now().Add(-100 * 24 * time.Hour)
	emptyEnd := empty.Add(time.Hour)
	reads := []flatRead{
		{name: "counts, every channel", sql: channelCountsSQL, args: []any{nil}},
		{name: "counts, one channel", sql: channelCountsSQL, args: []any{"sms"}},
		{name: "gauges", sql: channelGaugesSQL},
	}
	for _, f := range []struct {
		name string
		f    IntentFilter
	}{
		{"first page", IntentFilter{}},
		{"status IN_DOUBT", IntentFilter{Status: str("IN_DOUBT")}},
		{"status FAILED, one channel", IntentFilter{Status: str("FAILED"), Channel: str("pay")}},
		{"status SENT, one channel", IntentFilter{Status: str("SENT"), Channel: str("sms")}},
		{"status PENDING", IntentFilter{Status: str("PENDING")}},
		{"delivery undelivered", IntentFilter{Delivery: str("undelivered")}},
		{"delivery undelivered on a channel that has none", IntentFilter{Delivery: str("undelivered"), Channel: str("hook")}},
		{"delivery accepted", IntentFilter{Delivery: str("accepted")}},
		{"since 30 minutes ago", IntentFilter{Since: &recent}},
		{"a window that matches none", IntentFilter{Since: &empty, Until: &emptyEnd}},
		{"delivered, within a window that matches none", IntentFilter{Delivery: str("delivered"), Since: &empty, Until: &emptyEnd}},
		{"event id", IntentFilter{EventID: str("h-77")}},
		{"search: event id", IntentFilter{Search: str("h-78")}},
		{"search: idempotency key", IntentFilter{Search: str("sms:h-79")}},
		{"search: provider reference", IntentFilter{Search: str("ref-80")}},
		{"search: nothing", IntentFilter{Search: str("nothing-here")}},
		{"scoped to two channels, IN_DOUBT", IntentFilter{Status: str("IN_DOUBT"), Channels: []string{"sms", "pay"}}},
		{"scoped to two channels, FAILED", IntentFilter{Status: str("FAILED"), Channels: []string{"hook", "pay"}}},
		{"status FAILED", IntentFilter{Status: str("FAILED")}},
		{"status FAILED on a channel with few", IntentFilter{Status: str("FAILED"), Channel: str("nowhere")}},
		{"scoped, undelivered", IntentFilter{Delivery: str("undelivered"), Channels: []string{"sms", "hook"}}},
	} {
		f.f.Limit = 51
		reads = append(reads, flatRead{name: "list: " + f.name, list: &f.f})
	}
	for _, f := range []struct {
		name string
		f    EventFilter
	}{
		{"first page", EventFilter{}},
		{"one channel", EventFilter{Channel: str("sms")}},
		{"a channel with none", EventFilter{Channel: str("pay")}},
		{"a scope with none", EventFilter{Channels: []string{"pay", "hook"}}},
		{"orphans", EventFilter{OrphansOnly: true}},
		{"one intent", EventFilter{IntentID: new(int64(2))}},
	} {
		reads = append(reads, flatRead{name: "events: " + f.name, events: &f.f})
	}
	return reads
}

// buffers runs r six times (so a prepared statement would have switched to a
// generic plan by the last), then EXPLAIN ANALYZE of it, and returns the
// shared buffers the last run touched, with its plan.
func buffers(t *testing.T, pool *pgxpool.Pool, r flatRead) (int64, string) {
	t.Helper()
	ctx := context.Background()
	if r.list != nil {
		f := *r.list
		if f.Since != nil {
			if err := pool.QueryRow(ctx, idBeforeSQL, *f.Since).Scan(&f.After); err != nil {
				t.Fatal(err)
			}
		}
		r.sql, r.args = f.statement()
	}
	if r.events != nil {
		r.events.Limit = 51
		r.sql, r.args = r.events.statement()
	}
	for range 6 {
		rows, err := pool.Query(ctx, r.sql, r.args...)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		rows.Close()
		if rows.Err() != nil {
			t.Fatalf("%s: %v", r.name, rows.Err())
		}
	}
	var plan []byte
	args := append([]any{pgx.QueryExecModeExec}, r.args...)
	if err := pool.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+r.sql, args...).Scan(&plan); err != nil {
		t.Fatalf("%s: explain: %v", r.name, err)
	}
	var out []struct {
		Plan struct {
			Hit  int64 `json:"Shared Hit Blocks"`
			Read int64 `json:"Shared Read Blocks"`
		}
	}
	if err := json.Unmarshal(plan, &out); err != nil || len(out) != 1 {
		t.Fatalf("%s: explain: %v", r.name, err)
	}
	return out[0].Plan.Hit + out[0].Plan.Read, string(plan)
}

// TestReadsFlatInHistory: every read an operator or Prometheus makes touches
// about as many pages with five times the history: at most 1.5 times as many,
// plus 80 for a deeper index and a time window's block ranges (the newest,
// not yet summarized, and one shared with older rows: 32 pages each). Before migrations 011 and 012 the counts,
// the gauges and most list filters read every retained row.
func TestReadsFlatInHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 100,000 intents")
	}
	pool := pgtest.New(t)
	ctx := context.Background()
	seedHistory(t, pool, 1, 20_000)
	for _, s := range []string{
		`INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key, status, attempts, lease_expires_at)
		 SELECT 'live-' || g, 'sms', '{"to":"+15550000000"}', 'sms:live-' || g,
		        (ARRAY['PENDING', 'SENDING', 'IN_DOUBT'])[1 + g % 3], 1, now() + interval '1 minute'
		 FROM generate_series(1, 9) g`,
	} {
		if _, err := pool.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	small := map[string]int64{}
	for _, r := range flatReads() {
		small[r.name], _ = buffers(t, pool, r)
	}
	seedHistory(t, pool, 20_001, 80_000)
	for _, r := range flatReads() {
		n, plan := buffers(t, pool, r)
		t.Logf("%-50s %5d pages at 20,000, %5d at 100,000", r.name, small[r.name], n)
		if float64(n) > 1.5*float64(small[r.name])+80 {
			t.Errorf("%s: %d pages at 20,000 intents, %d at 100,000: the read grows with history\n%s\n%s",
				r.name, small[r.name], n, r.sql, compact(plan))
		}
	}
}

// compact keeps the plan's node types and relation and index names, enough to
// see what a read scanned.
func compact(plan string) string {
	var b strings.Builder
	for _, l := range strings.Split(plan, "\n") {
		l = strings.TrimSpace(l)
		for _, k := range []string{`"Node Type"`, `"Index Name"`, `"Relation Name"`, `"Actual Rows"`, `"Rows Removed by Filter"`} {
			if strings.HasPrefix(l, k) {
				b.WriteString(l + " ")
			}
		}
	}
	return b.String()
}

// TestCountsFollowChanges: the counts kept as changes happen equal a count of
// the rows, after updates that settle, reopen and redeliver rows, inserts of
// settled rows, deletes, a fold, and more changes after the fold.
func TestCountsFollowChanges(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	check := func(when string) {
		t.Helper()
		counts, err := ChannelCounts(ctx, pool, effectdtype.SingleNode, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, c := range counts {
			got[c.Channel+"/"+string(c.Status)] = c.N
		}
		var ch, st string
		var n int64
		rows, err := pool.Query(ctx, `SELECT channel, status, count(*) FROM effectd.intents GROUP BY 1, 2`)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{}
		if _, err := pgx.ForEachRow(rows, []any{&ch, &st, &n}, func() error { want[ch+"/"+st] = n; return nil }); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: counts %v, rows %v", when, got, want)
		}
	}
	for _, s := range []string{
		`INSERT INTO effectd.channels (name, provider) VALUES ('a', 'webhook'), ('b', 'twilio')`,
		`INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key)
		 SELECT 'e' || g, CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END, '{}', 'k' || g FROM generate_series(1, 300) g`,
		`UPDATE effectd.intents SET status = 'SENDING', lease_expires_at = now() WHERE id % 3 = 0`,
		`UPDATE effectd.intents SET status = 'SENT', lease_expires_at = NULL, delivery = 'accepted' WHERE status = 'SENDING' AND id % 2 = 0`,
		`UPDATE effectd.intents SET status = 'FAILED', lease_expires_at = NULL WHERE status = 'SENDING'`,
		`UPDATE effectd.intents SET delivery = 'delivered' WHERE delivery = 'accepted' AND id % 4 = 0`,
		`UPDATE effectd.intents SET status = 'PENDING' WHERE status = 'FAILED' AND id % 5 = 0`,
		`UPDATE effectd.intents SET status = 'IN_DOUBT' WHERE status = 'PENDING' AND id % 7 = 0`,
		`INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key, status)
		 SELECT 'x' || g, 'b', '{}', 'x' || g, 'CANCELLED' FROM generate_series(1, 10) g`,
		`DELETE FROM effectd.intents WHERE status = 'SENT' AND id % 8 = 0`,
		foldCountsSQL,
		`UPDATE effectd.intents SET status = 'SKIPPED' WHERE status = 'PENDING' AND id % 11 = 0`,
		`DELETE FROM effectd.intents WHERE status = 'CANCELLED' AND event_id = 'x3'`,
	} {
		if _, err := pool.Exec(ctx, s); err != nil {
			t.Fatalf("%.60s: %v", s, err)
		}
		check(s[:min(60, len(s))])
	}
	if _, err := pool.Exec(ctx, `TRUNCATE effectd.intents`); err != nil {
		t.Fatal(err)
	}
	check("truncate")
}

// TestListSinceMark: a list from a time on starts at the id marked before
// that time and still returns every row created since, among rows created
// before and after the marks.
func TestListSinceMark(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	for _, s := range []string{
		`INSERT INTO effectd.channels (name, provider) VALUES ('a', 'webhook')`,
		`INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key, created_at)
		 SELECT 'old' || g, 'a', '{}', 'a:old' || g, now() - interval '2 hours' FROM generate_series(1, 20) g`,
		markIDsSQL,
		`UPDATE effectd.id_marks SET at = now() - interval '90 minutes'`,
		`INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key, created_at)
		 SELECT 'new' || g, 'a', '{}', 'a:new' || g, now() - interval '1 hour' FROM generate_series(1, 5) g`,
	} {
		var args []any
		if s == markIDsSQL {
			args = []any{"1 day"}
		}
		if _, err := pool.Exec(ctx, s, args...); err != nil {
			t.Fatalf("%.60s: %v", s, err)
		}
	}
	since := time.Now().Add(-80 * time.Minute)
	var n int
	if err := ListIntents(ctx, pool, effectdtype.SingleNode, IntentFilter{Limit: 100, Since: &since}, func(effectdtype.IntentRow) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Fatalf("%d intents since %s, want the 5 created an hour ago", n, since.Format(time.TimeOnly))
	}
}
