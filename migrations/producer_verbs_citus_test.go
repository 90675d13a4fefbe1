//go:build citus

package migrations_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/migrations"
)

// TestCitusCancel: in the distributed mode cancel needs the producer's
// bucket and works on its shard: the intent cancelled, audited, its
// notification written on the bucket once and its settled count as a delta;
// a second cancel answers the same; another bucket does not hold the event;
// a rolled-back cancel leaves it PENDING; a producer role cannot cancel on
// another team's channel.
func TestCitusCancel(t *testing.T) {
	pool, _ := citusDB(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO effectd.channels (name, provider) VALUES ('c-notify', 'webhook'), ('other', 'webhook');
UPDATE effectd.channels SET notify = '{"channel": "c-notify", "on": ["cancelled"]}' WHERE name = 'c'`); err != nil {
		t.Fatal(err)
	}
	app := newRole(t, pool, "c_app", "LOGIN")
	if _, err := migrations.New(pool).SetProducers(ctx, []migrations.Producer{{Role: app, Channels: []string{"c"}}}); err != nil {
		t.Fatal(err)
	}
	for _, e := range []string{"e1", "e2", "sending"} {
		if _, err := pool.Exec(ctx, `SELECT effectd.enqueue(event_id => $1, channel => 'c', payload => '{}', bucket => 3)`, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `SELECT effectd.enqueue(event_id => 'o1', channel => 'other', payload => '{}', bucket => 3)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE effectd.intents SET status = 'SENDING', attempts = 1, lease_expires_at = now() + interval '1 minute' WHERE bucket = 3 AND event_id = 'sending'`); err != nil {
		t.Fatal(err)
	}
	pc := connectAs(t, pool, app)
	cancelIn := func(q querier, event, channel string, bucket any) (string, string) {
		var got *string
		err := q.QueryRow(ctx, `SELECT effectd.cancel(event_id => $1, channel => $2, reason => 'order cancelled', bucket => $3)`, event, channel, bucket).Scan(&got)
		code, msg := sqlState(err)
		if got != nil {
			return *got, code
		}
		return "", code + " " + msg
	}
	if got, code := cancelIn(pc, "e1", "c", nil); !strings.HasPrefix(code, "22023") {
		t.Errorf("cancel without a bucket = %q %s, want 22023", got, code)
	}
	for _, c := range []struct {
		bucket    int
		want, why string
		event     string
	}{{3, "CANCELLED", "first", "e1"}, {3, "CANCELLED", "again", "e1"}, {4, "", "another bucket", "e1"}, {3, "SENDING", "claimed", "sending"}} {
		if got, code := cancelIn(pc, c.event, "c", c.bucket); got != c.want || strings.TrimSpace(code) != "" {
			t.Errorf("cancel (%s) = %q %s, want %q", c.why, got, code, c.want)
		}
	}
	if got, code := cancelIn(pc, "o1", "other", 3); !strings.HasPrefix(code, "42501") {
		t.Errorf("cancel of another team's intent = %q %s, want 42501", got, code)
	}
	tx, err := pc.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := cancelIn(tx, "e2", "c", 3); got != "CANCELLED" {
		t.Errorf("cancel in a transaction = %q", got)
	}
	tx.Rollback(ctx)

	rows, _ := pool.Query(ctx, `SELECT channel || '/' || event_id || '=' || status FROM effectd.intents WHERE bucket = 3 ORDER BY 1`)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := "c-notify/c:e1:cancelled=PENDING c/e1=CANCELLED c/e2=PENDING c/sending=SENDING other/o1=PENDING"; strings.Join(got, " ") != want {
		t.Errorf("intents of bucket 3 = %v, want %s", got, want)
	}
	var counted, audited int
	if err := pool.QueryRow(ctx, `SELECT (SELECT coalesce(sum(n), 0) FROM effectd.intent_count_deltas WHERE bucket = 3 AND channel = 'c' AND status = 'CANCELLED'),
(SELECT count(*) FROM effectd.audit WHERE action = 'intent.cancel' AND actor = $1 AND reason = 'order cancelled')`, app).Scan(&counted, &audited); err != nil || counted != 1 || audited != 1 {
		t.Errorf("CANCELLED counted %d, audited %d, %v; want 1, 1", counted, audited, err)
	}
}

// TestCitusStatus: status reads the intent on the producer's bucket, and a
// producer role cannot read another team's.
func TestCitusStatus(t *testing.T) {
	pool, _ := citusDB(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO effectd.channels (name, provider) VALUES ('other', 'webhook')`); err != nil {
		t.Fatal(err)
	}
	app := newRole(t, pool, "c_app", "LOGIN")
	if _, err := migrations.New(pool).SetProducers(ctx, []migrations.Producer{{Role: app, Channels: []string{"c"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT effectd.enqueue(event_id => 'e1', channel => 'c', payload => '{}', bucket => 5);
SELECT effectd.enqueue(event_id => 'o1', channel => 'other', payload => '{}', bucket => 5);
UPDATE effectd.intents SET status = 'FAILED', attempts = 1, last_error = 'HTTP 410' WHERE bucket = 5 AND event_id = 'e1';
INSERT INTO effectd.attempts (bucket, intent_id, attempt, started_at, outcome, error)
SELECT 5, id, 1, now(), 'failed', 'HTTP 410' FROM effectd.intents WHERE bucket = 5 AND event_id = 'e1'`); err != nil {
		t.Fatal(err)
	}
	pc := connectAs(t, pool, app)
	read := func(event, channel string, bucket int) (string, error) {
		var status, class string
		var attempts int
		err := pc.QueryRow(ctx, `SELECT status, attempts, coalesce(last_error_class, '') FROM effectd.status(event_id => $1, channel => $2, bucket => $3)`,
			event, channel, bucket).Scan(&status, &attempts, &class)
		return fmt.Sprintf("%s %d %s", status, attempts, class), err
	}
	if got, err := read("e1", "c", 5); err != nil || got != "FAILED 1 failed" {
		t.Errorf("status e1 = %q, %v; want FAILED 1 failed", got, err)
	}
	if _, err := read("e1", "c", 6); err != pgx.ErrNoRows {
		t.Errorf("status e1 on another bucket: %v, want no row", err)
	}
	if _, err := read("o1", "other", 5); func() string { c, _ := sqlState(err); return c }() != "42501" {
		t.Errorf("status of another team's intent: %v, want 42501", err)
	}
}

// TestCitusEnqueueMany: a batch on the producer's bucket: the same per-row
// answers, refused whole with a bad row, and with keep_valid the valid new
// rows and their keys on the bucket.
func TestCitusEnqueueMany(t *testing.T) {
	pool, _ := citusDB(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `SELECT effectd.enqueue(event_id => 'e1', channel => 'c', payload => '{}', bucket => 2)`); err != nil {
		t.Fatal(err)
	}
	const batch = `SELECT ord, outcome FROM effectd.enqueue_many(
    ARRAY(SELECT (e, c, p, NULL, NULL, NULL)::effectd.new_intent FROM unnest($1::text[], $2::text[], $3::jsonb[]) AS t(e, c, p)),
    keep_valid => $4, bucket => 2)`
	events := []string{"e0", "e1", "e2", "e2", "e3"}
	channels := []string{"c", "c", "c", "c", "c"}
	payloads := []string{"{}", "{}", "{}", "{}", "[]"}
	_, err := pool.Exec(ctx, batch, events, channels, payloads, false)
	if code, msg := sqlState(err); code != "22023" || !strings.Contains(msg, "#5 ") {
		t.Fatalf("a batch with a bad row = %s %q, want 22023 naming row 5", code, msg)
	}
	rows, _ := pool.Query(ctx, batch, events, channels, payloads, true)
	answers, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var ord int
		var outcome string
		err := r.Scan(&ord, &outcome)
		return fmt.Sprintf("%d:%s", ord, outcome), err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "1:new 2:duplicate 3:new 4:duplicate 5:invalid"; strings.Join(answers, " ") != want {
		t.Errorf("answers = %v, want %s", answers, want)
	}
	var intents, keys int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM effectd.intents WHERE bucket = 2), (SELECT count(*) FROM effectd.dedupe_keys WHERE bucket = 2)`).Scan(&intents, &keys); err != nil || intents != 3 || keys != 3 {
		t.Errorf("bucket 2 holds %d intents, %d keys, %v; want 3, 3", intents, keys, err)
	}
}
