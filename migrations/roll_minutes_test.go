package migrations_test

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/pgtest"
)

// rollMinutes024 returns migration 024's roll_minutes, the reference the
// current trigger must match, renamed to roll_minutes_024 and appending to
// effectd.rollup_deltas_024, read from the migration's own file.
func rollMinutes024(t *testing.T) string {
	t.Helper()
	text, err := os.ReadFile("024_minute_rollups.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "CREATE FUNCTION effectd.roll_minutes()", "-- +goose StatementEnd"
	s := string(text)
	from := strings.Index(s, begin)
	to := strings.Index(s, end)
	if from < 0 || to < from {
		t.Fatalf("024_minute_rollups.up.sql: no %q … %q", begin, end)
	}
	body := s[from:to]
	for old, renamed := range map[string]string{
		begin: "CREATE FUNCTION effectd.roll_minutes_024()",
		"INSERT INTO effectd.minute_rollup_deltas (": "INSERT INTO effectd.rollup_deltas_024 (",
	} {
		if strings.Count(body, old) != 1 {
			t.Fatalf("024's roll_minutes holds %q %d times, want once", old, strings.Count(body, old))
		}
		body = strings.Replace(body, old, renamed, 1)
	}
	return body
}

// rollupTransitions are the statements of the test, in order: each is one
// UPDATE of intents (so one firing of the statement triggers), a claim, a
// mixed completion, deliveries and the operators' and reconciler's moves.
// Intents are i1 … i40 of channels 'refund' (odd) and 'sms' (even).
var rollupTransitions = []struct{ name, sql string }{
	{"claim", `UPDATE effectd.intents SET status = 'SENDING', attempts = attempts + 1, claimed_at = now(),
		lease_expires_at = now() + interval '1 minute' WHERE status = 'PENDING'`},
	{"lease renewal", `UPDATE effectd.intents SET lease_expires_at = now() + interval '2 minutes' WHERE status = 'SENDING'`},
	{"a delivery heard while sending", `UPDATE effectd.intents SET delivery = 'accepted' WHERE event_id IN ('i39', 'i40')`},
	{"mixed completion", `UPDATE effectd.intents SET
		status = CASE id % 8 WHEN 0 THEN 'SENT' WHEN 1 THEN 'FAILED' WHEN 2 THEN 'IN_DOUBT' WHEN 3 THEN 'SKIPPED'
		                     WHEN 4 THEN 'PENDING' WHEN 5 THEN 'PENDING' WHEN 6 THEN 'SENT' ELSE 'SENDING' END,
		last_error = CASE WHEN id % 8 IN (1, 2, 4) THEN 'provider said no' END,
		delivery = CASE WHEN id % 8 = 6 THEN 'accepted' ELSE delivery END,
		lease_expires_at = CASE WHEN id % 8 = 7 THEN lease_expires_at END
		WHERE status = 'SENDING' AND event_id NOT IN ('i39', 'i40')`},
	{"deliveries", `UPDATE effectd.intents SET delivery = CASE id % 3 WHEN 0 THEN 'accepted' WHEN 1 THEN 'delivered' ELSE 'undelivered' END
		WHERE status = 'SENT'`},
	{"the same delivery again", `UPDATE effectd.intents SET delivery = delivery, delivery_at = now() WHERE delivery IS NOT NULL`},
	{"second claim of the backed off", `UPDATE effectd.intents SET status = 'SENDING', attempts = attempts + 1,
		lease_expires_at = now() + interval '1 minute' WHERE status = 'PENDING'`},
	{"second completion", `UPDATE effectd.intents SET status = CASE WHEN id % 2 = 0 THEN 'SENT' ELSE 'FAILED' END,
		last_error = CASE WHEN id % 2 = 1 THEN 'gone' END WHERE status = 'SENDING' AND delivery IS NULL`},
	{"a cancel out of sending with an error", `UPDATE effectd.intents SET status = 'CANCELLED', last_error = 'cancelled'
		WHERE event_id IN ('i39', 'i40')`},
	{"reconcile in doubt", `UPDATE effectd.intents SET status = CASE WHEN id % 2 = 0 THEN 'SENT' ELSE 'FAILED' END,
		delivery = CASE WHEN id % 2 = 0 THEN 'delivered' END WHERE status = 'IN_DOUBT'`},
	{"operator retries the failed", `UPDATE effectd.intents SET status = 'PENDING', last_error = NULL WHERE status = 'FAILED'`},
	// old and new versions differ in created_at: no measure pairs them
	{"a delivery that also moves the creation time", `UPDATE effectd.intents SET delivery = 'accepted',
		created_at = created_at + interval '1 microsecond' WHERE event_id IN ('i1', 'i2')`},
	{"touch everything", `UPDATE effectd.intents SET updated_at = now()`},
}

// rollupDeltas reads one deltas table, ordered, as comparable strings.
func rollupDeltas(t *testing.T, pool *pgxpool.Pool, table string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT channel || ' ' || measure || ' ' || slot || ' ' || n || ' @' ||
		to_char(minute, 'HH24:MI') FROM effectd.`+table+` ORDER BY channel, measure, slot, n, minute`)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRollMinutesMatchesMigration024: the current roll_minutes appends, for
// each statement of a mixed batch of transitions, exactly the deltas
// migration 024's body appends for the same statement (run beside it as a
// second trigger into a table of its own), and a claim, a lease's renewal
// or a touch appends nothing; every measure is counted at least once, so a
// measure counted differently shows.
func TestRollMinutesMatchesMigration024(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	for _, q := range []string{
		`CREATE TABLE effectd.rollup_deltas_024 (LIKE effectd.minute_rollup_deltas)`,
		rollMinutes024(t),
		`CREATE TRIGGER intents_roll_minutes_024 AFTER UPDATE ON effectd.intents
			REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
			FOR EACH STATEMENT EXECUTE FUNCTION effectd.roll_minutes_024()`,
		`INSERT INTO effectd.channels (name, provider) VALUES ('refund', 'stripe'), ('sms', 'twilio')`,
		// created 1 ms to about 10 min ago, so the latencies fall in many slots
		`INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key, created_at)
			SELECT 'i' || i, CASE WHEN i % 2 = 1 THEN 'refund' ELSE 'sms' END, '{}', 'k' || i,
			       now() - make_interval(secs => power(1.4, i) / 1000)
			FROM generate_series(1, 40) AS i`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	quiet := map[string]bool{"claim": true, "lease renewal": true, "the same delivery again": true,
		"second claim of the backed off": true, "operator retries the failed": true, "touch everything": true,
		"a delivery that also moves the creation time": true}
	for _, s := range rollupTransitions {
		before := len(rollupDeltas(t, pool, "rollup_deltas_024"))
		if _, err := pool.Exec(ctx, s.sql); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		want := rollupDeltas(t, pool, "rollup_deltas_024")
		if got := rollupDeltas(t, pool, "minute_rollup_deltas"); !reflect.DeepEqual(got, want) {
			t.Fatalf("after %q, roll_minutes appended\n%s\nmigration 024's body\n%s",
				s.name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if quiet[s.name] != (len(want) == before) {
			t.Errorf("%q: 024's body appended %d deltas; quiet = %v", s.name, len(want)-before, quiet[s.name])
		}
	}
	measures := map[string]int{}
	var slots int
	if err := pool.QueryRow(ctx, `SELECT count(DISTINCT slot) FROM effectd.rollup_deltas_024 WHERE measure = 'latency'`).Scan(&slots); err != nil {
		t.Fatal(err)
	}
	for _, d := range rollupDeltas(t, pool, "rollup_deltas_024") {
		measures[strings.Fields(d)[1]]++
	}
	for _, m := range []string{"sent", "failed", "in_doubt", "skipped", "accepted", "delivered", "undelivered",
		"provider_errors", "backoffs", "latency"} {
		if measures[m] == 0 {
			t.Errorf("no %s delta in the batch: the test does not cover it (%v)", m, measures)
		}
	}
	if slots < 5 {
		t.Errorf("latency deltas in %d slots, want at least 5", slots)
	}
}
