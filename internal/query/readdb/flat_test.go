package readdb

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
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/internal/query/harnessdb"
)

// seedHistory adds n settled intents spread over the 14 days before an hour
// ago, over three channels, each with the attempt that sent it: mostly SENT
// and delivered, one in 3,000 FAILED, one in 500 undelivered, as an import
// would write them (already settled, counted by migration 012's insert
// cancelTen stands, in TestCountsFollowChanges' steps, for ten CANCELLED intents
// made by the fixture factory.
const cancelTen = "ten CANCELLED intents of b"

// trigger); then folds the counts, as the dispatcher's fold loop does.
func seedHistory(t *testing.T, pool *pgxpool.Pool, from, n int) {
	t.Helper()
	ctx := context.Background()
	if from == 1 {
		// a partition per day, as a deployment that ran 15 days has them
		if err := harnessdb.DayPartitions(ctx, pool, 15); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range [][2]string{{"hook", "webhook"}, {"pay", "stripe"}, {"sms", "twilio"}} {
		fixture.AddChannel(t, pool, c[0], c[1], fixture.IfAbsent())
	}
	now := time.Now()
	made := fixture.Intents(t, pool, n, func(k int) []fixture.IntentOption {
		g := from + k - 1
		ch := []string{"hook", "pay", "sms"}[g%3]
		at := now.Add(-time.Hour - time.Duration(from+n-g)*(14*24*time.Hour/time.Duration(from+n)))
		opts := []fixture.IntentOption{fixture.Event(fmt.Sprintf("h-%d", g)), fixture.Channel(ch),
			fixture.Payload(`{"to":"+15550000000"}`), fixture.CreatedAt(at), fixture.UpdatedAt(at)}
		switch {
		case g%3000 == 0:
			return append(opts, fixture.Status("FAILED"))
		case g%500 == 0 && ch != "hook":
			opts = append(opts, fixture.Delivery("undelivered", ""))
		default:
			opts = append(opts, fixture.Delivery("delivered", ""))
		}
		return append(opts, fixture.Status("SENT"), fixture.ProviderRef(fmt.Sprintf("ref-%d", g)), fixture.DeliveredAt(at))
	})
	var attempts []fixture.Attempt
	var events []fixture.ProviderEvent
	for k, m := range made {
		g := from + k
		ref := ""
		if g%3000 != 0 {
			ref = fmt.Sprintf("ref-%d", g)
		}
		attempts = append(attempts, fixture.Attempt{IntentID: m.ID, StartedAt: m.CreatedAt, ProviderRef: ref})
		if m.Channel == "sms" && ref != "" {
			events = append(events, fixture.ProviderEvent{Provider: "twilio", EventID: ref + ":delivered", Channel: "sms",
				IntentID: m.ID, ObjectRef: ref, Type: "delivered", Outcome: "applied", ReceivedAt: m.CreatedAt})
		}
	}
	fixture.AddAttempts(t, pool, attempts...)
	fixture.MarkIDs(t, pool, now.Add(-50*time.Minute))
	fixture.AddProviderEvents(t, pool, events...)
	fixture.AddProviderEvents(t, pool,
		fixture.ProviderEvent{Provider: "twilio", EventID: fmt.Sprintf("orphan-1-%d", from), Channel: "sms", ObjectRef: "SMx", Outcome: "orphan"},
		fixture.ProviderEvent{Provider: "twilio", EventID: fmt.Sprintf("orphan-2-%d", from), Channel: "sms", ObjectRef: "SMx", Outcome: "orphan"})
	for _, s := range []string{
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
	list   *effectdtype.IntentFilter // a list: ListIntents's statement, after its id mark
	events *effectdtype.EventFilter  // a list of provider events: ListEvents's statement
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
		f    effectdtype.IntentFilter
	}{
		{"first page", effectdtype.IntentFilter{}},
		{"status IN_DOUBT", effectdtype.IntentFilter{Status: str("IN_DOUBT")}},
		{"status FAILED, one channel", effectdtype.IntentFilter{Status: str("FAILED"), Channel: str("pay")}},
		{"status SENT, one channel", effectdtype.IntentFilter{Status: str("SENT"), Channel: str("sms")}},
		{"status PENDING", effectdtype.IntentFilter{Status: str("PENDING")}},
		{"delivery undelivered", effectdtype.IntentFilter{Delivery: str("undelivered")}},
		{"delivery undelivered on a channel that has none", effectdtype.IntentFilter{Delivery: str("undelivered"), Channel: str("hook")}},
		{"delivery accepted", effectdtype.IntentFilter{Delivery: str("accepted")}},
		{"since 30 minutes ago", effectdtype.IntentFilter{Since: &recent}},
		{"a window that matches none", effectdtype.IntentFilter{Since: &empty, Until: &emptyEnd}},
		{"delivered, within a window that matches none", effectdtype.IntentFilter{Delivery: str("delivered"), Since: &empty, Until: &emptyEnd}},
		{"event id", effectdtype.IntentFilter{EventID: str("h-77")}},
		{"search: event id", effectdtype.IntentFilter{Search: str("h-78")}},
		{"search: idempotency key", effectdtype.IntentFilter{Search: str("sms:h-79")}},
		{"search: provider reference", effectdtype.IntentFilter{Search: str("ref-80")}},
		{"search: nothing", effectdtype.IntentFilter{Search: str("nothing-here")}},
		{"scoped to two channels, IN_DOUBT", effectdtype.IntentFilter{Status: str("IN_DOUBT"), Channels: []string{"sms", "pay"}}},
		{"scoped to two channels, FAILED", effectdtype.IntentFilter{Status: str("FAILED"), Channels: []string{"hook", "pay"}}},
		{"status FAILED", effectdtype.IntentFilter{Status: str("FAILED")}},
		{"status FAILED on a channel with few", effectdtype.IntentFilter{Status: str("FAILED"), Channel: str("nowhere")}},
		{"scoped, undelivered", effectdtype.IntentFilter{Delivery: str("undelivered"), Channels: []string{"sms", "hook"}}},
	} {
		f.f.Limit = 51
		reads = append(reads, flatRead{name: "list: " + f.name, list: &f.f})
	}
	for _, f := range []struct {
		name string
		f    effectdtype.EventFilter
	}{
		{"first page", effectdtype.EventFilter{}},
		{"one channel", effectdtype.EventFilter{Channel: str("sms")}},
		{"a channel with none", effectdtype.EventFilter{Channel: str("pay")}},
		{"a scope with none", effectdtype.EventFilter{Channels: []string{"pay", "hook"}}},
		{"orphans", effectdtype.EventFilter{OrphansOnly: true}},
		{"one intent", effectdtype.EventFilter{IntentID: new(int64(2))}},
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
		r.sql, r.args = intentList{IntentFilter: f}.statement()
	}
	if r.events != nil {
		r.events.Limit = 51
		r.sql, r.args = eventsStatement(*r.events)
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
	seedHistory(t, pool, 1, 20_000)
	fixture.Intents(t, pool, 9, func(g int) []fixture.IntentOption {
		return []fixture.IntentOption{fixture.Event(fmt.Sprintf("live-%d", g)), fixture.Channel("sms"),
			fixture.Payload(`{"to":"+15550000000"}`), fixture.Status([]string{"PENDING", "SENDING", "IN_DOUBT"}[g%3]),
			fixture.Attempts(1), fixture.Lease(time.Now().Add(time.Minute))}
	})
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
		counts, err := ChannelCounts(ctx, pool, nil)
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
	fixture.AddChannel(t, pool, "a", "webhook")
	fixture.AddChannel(t, pool, "b", "twilio")
	fixture.Intents(t, pool, 300, func(g int) []fixture.IntentOption {
		return []fixture.IntentOption{fixture.Event(fmt.Sprintf("e%d", g)), fixture.Channel([]string{"a", "b"}[g%2])}
	})
	check("300 PENDING intents")
	for _, s := range []string{
		`UPDATE effectd.intents SET status = 'SENDING', lease_expires_at = now() WHERE id % 3 = 0`,
		`UPDATE effectd.intents SET status = 'SENT', lease_expires_at = NULL, delivery = 'accepted' WHERE status = 'SENDING' AND id % 2 = 0`,
		`UPDATE effectd.intents SET status = 'FAILED', lease_expires_at = NULL WHERE status = 'SENDING'`,
		`UPDATE effectd.intents SET delivery = 'delivered' WHERE delivery = 'accepted' AND id % 4 = 0`,
		`UPDATE effectd.intents SET status = 'PENDING' WHERE status = 'FAILED' AND id % 5 = 0`,
		`UPDATE effectd.intents SET status = 'IN_DOUBT' WHERE status = 'PENDING' AND id % 7 = 0`,
		cancelTen,
		`DELETE FROM effectd.intents WHERE status = 'SENT' AND id % 8 = 0`,
		foldCountsSQL,
		`UPDATE effectd.intents SET status = 'SKIPPED' WHERE status = 'PENDING' AND id % 11 = 0`,
		`DELETE FROM effectd.intents WHERE status = 'CANCELLED' AND event_id = 'x3'`,
	} {
		if s == cancelTen {
			fixture.Intents(t, pool, 10, func(g int) []fixture.IntentOption {
				return []fixture.IntentOption{fixture.Event(fmt.Sprintf("x%d", g)), fixture.Channel("b"), fixture.Status("CANCELLED"),
					fixture.Attempts(0)}
			})
		} else if _, err := pool.Exec(ctx, s); err != nil {
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
	fixture.AddChannel(t, pool, "a", "webhook")
	made := func(prefix string, n int, ago time.Duration) {
		fixture.Intents(t, pool, n, func(g int) []fixture.IntentOption {
			return []fixture.IntentOption{fixture.Event(fmt.Sprintf("%s%d", prefix, g)), fixture.Channel("a"),
				fixture.CreatedAt(time.Now().Add(-ago))}
		})
	}
	made("old", 20, 2*time.Hour)
	for _, s := range []string{
		markIDsSQL,
		`UPDATE effectd.id_marks SET at = now() - interval '90 minutes'`,
	} {
		var args []any
		if s == markIDsSQL {
			args = []any{"1 day"}
		}
		if _, err := pool.Exec(ctx, s, args...); err != nil {
			t.Fatalf("%.60s: %v", s, err)
		}
	}
	made("new", 5, time.Hour)
	since := time.Now().Add(-80 * time.Minute)
	var n int
	if err := ListIntents(ctx, pool, effectdtype.IntentFilter{Limit: 100, Since: &since}, func(effectdtype.IntentRow) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Fatalf("%d intents since %s, want the 5 created an hour ago", n, since.Format(time.TimeOnly))
	}
}
