package migrations_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/migrations"
)

// cancelSQL and statusSQL call the producers' verbs of migration 021.
const (
	cancelSQL = `SELECT effectd.cancel(event_id => $1, channel => $2, reason => $3)`
	statusSQL = `SELECT status, attempts, coalesce(provider_ref, ''), coalesce(delivery, ''), coalesce(last_error_class, ''), next_attempt_at IS NOT NULL
FROM effectd.status(event_id => $1, channel => $2)`
	manySQL = `SELECT ord, outcome, coalesce(field, ''), coalesce(message, '')
FROM effectd.enqueue_many(ARRAY(SELECT (e, c, p, NULL, NULL, NULL)::effectd.new_intent
                                FROM unnest($1::text[], $2::text[], $3::jsonb[]) AS t(e, c, p)), keep_valid => $4)`
)

// cancel calls effectd.cancel and returns what it answered ("" for NULL) and
// the SQLSTATE of its error, if any.
func cancel(q querier, event, channel string) (answer, code string) {
	var got *string
	err := q.QueryRow(context.Background(), cancelSQL, event, channel, "order cancelled").Scan(&got)
	code, _ = sqlState(err)
	if got != nil {
		answer = *got
	}
	return answer, code
}

// TestProducerVerbsOfRoles: a producer role cancels, reads and enqueues many
// on its own channels, and on another team's channel each verb is refused
// with 42501 before it reads anything: an event the other channel holds is
// refused as one it does not, and nothing changes.
func TestProducerVerbsOfRoles(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO effectd.channels (name, provider) VALUES ('refund', 'stripe'), ('sms', 'twilio')`); err != nil {
		t.Fatal(err)
	}
	payments := newRole(t, pool, "payments_app", "LOGIN")
	grants, err := migrations.New(pool).SetProducers(ctx, []migrations.Producer{{Role: payments, Channels: []string{"refund"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"enqueue_many(effectd.new_intent[],boolean,bigint)", "cancel(text,text,text,bigint)", "status(text,text,bigint)"} {
		if !strings.Contains(strings.Join(grants, "\n"), "GRANT EXECUTE ON FUNCTION effectd."+verb+` TO "`+payments+`"`) {
			t.Errorf("grants do not give %s EXECUTE on %s:\n%s", payments, verb, strings.Join(grants, "\n"))
		}
	}
	for _, e := range []string{"s-held", "s-other"} {
		if code, msg := enqueue(pool, e, "sms", smsPayload); code != "" {
			t.Fatalf("owner → sms: %s %s", code, msg)
		}
	}
	pc := connectAs(t, pool, payments)
	if code, msg := enqueue(pc, "r1", "refund", refundPayload); code != "" {
		t.Fatalf("payments → refund: %s %s", code, msg)
	}

	// Its own channel: every verb.
	var status string
	var attempts int
	var ref, delivery, class string
	var due bool
	if err := pc.QueryRow(ctx, statusSQL, "r1", "refund").Scan(&status, &attempts, &ref, &delivery, &class, &due); err != nil || status != "PENDING" || !due {
		t.Errorf("payments: status of refund/r1 = %s %v, %v; want PENDING, due", status, due, err)
	}
	if got, code := cancel(pc, "r1", "refund"); got != "CANCELLED" || code != "" {
		t.Errorf("payments: cancel refund/r1 = %q %s, want CANCELLED", got, code)
	}
	if _, err := pc.Exec(ctx, manySQL, []string{"r2", "r3"}, []string{"refund", "refund"}, []string{refundPayload, refundPayload}, false); err != nil {
		t.Errorf("payments: enqueue_many on refund: %v", err)
	}

	// Another team's channel: refused, whatever the channel holds.
	for _, e := range []string{"s-held", "s-never"} {
		if got, code := cancel(pc, e, "sms"); code != "42501" {
			t.Errorf("payments: cancel sms/%s = %q %q, want 42501", e, got, code)
		}
		err := pc.QueryRow(ctx, statusSQL, e, "sms").Scan(&status, &attempts, &ref, &delivery, &class, &due)
		if code, msg := sqlState(err); code != "42501" || !strings.Contains(msg, `channel 'sms'`) {
			t.Errorf("payments: status of sms/%s = %s %q, want 42501 naming the channel", e, code, msg)
		}
	}
	_, err = pc.Exec(ctx, manySQL, []string{"s-held"}, []string{"sms"}, []string{smsPayload}, true)
	if code, msg := sqlState(err); code != "42501" || !strings.Contains(msg, `channel 'sms'`) {
		t.Errorf("payments: enqueue_many of an event sms holds = %s %q, want 42501 naming the channel, not a duplicate", code, msg)
	}
	_, err = pc.Exec(ctx, manySQL, []string{"r4", "s-new"}, []string{"refund", "sms"}, []string{refundPayload, smsPayload}, true)
	if code, msg := sqlState(err); code != "42501" || !strings.Contains(msg, `channel 'sms'`) {
		t.Errorf("payments: enqueue_many with a row of sms, keep_valid = %s %q, want 42501 naming the channel", code, msg)
	}
	var live, pending int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'PENDING') FROM effectd.intents WHERE channel = 'sms'`).Scan(&live, &pending); err != nil || live != 2 || pending != 2 {
		t.Errorf("sms after the refusals: %d intents, %d PENDING, %v; want 2, 2", live, pending, err)
	}
	var refunds int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE channel = 'refund'`).Scan(&refunds); err != nil || refunds != 3 {
		t.Errorf("refund intents = %d, %v; want 3 (r1, r2, r3)", refunds, err)
	}
}

// TestCancel: a PENDING intent, due or scheduled, is cancelled in the
// caller's transaction: audited with the reason and the calling role, the
// producer told once on its notify channel, counted as CANCELLED; a second
// cancel answers the same and writes nothing; SENDING, IN_DOUBT and settled
// intents are left as they are and answered; a rolled-back cancel leaves the
// intent PENDING; an event the channel does not hold answers NULL.
func TestCancel(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO effectd.channels (name, provider) VALUES ('sms', 'twilio'), ('sms-notify', 'webhook');
UPDATE effectd.channels SET notify = '{"channel": "sms-notify", "on": ["cancelled"]}' WHERE name = 'sms'`); err != nil {
		t.Fatal(err)
	}
	smsApp := newRole(t, pool, "sms_app", "LOGIN")
	if _, err := migrations.New(pool).SetProducers(ctx, []migrations.Producer{{Role: smsApp, Channels: []string{"sms"}}}); err != nil {
		t.Fatal(err)
	}
	for _, e := range []string{"due", "later", "sending", "doubt", "sent", "rolled-back"} {
		if code, msg := enqueue(pool, e, "sms", smsPayload); code != "" {
			t.Fatal(code, msg)
		}
	}
	if _, err := pool.Exec(ctx, `
UPDATE effectd.intents SET next_attempt_at = now() + interval '1 day' WHERE event_id = 'later';
UPDATE effectd.intents SET status = 'SENDING', attempts = 1, lease_expires_at = now() + interval '1 minute' WHERE event_id = 'sending';
UPDATE effectd.intents SET status = 'IN_DOUBT', attempts = 1 WHERE event_id = 'doubt';
UPDATE effectd.intents SET status = 'SENT', attempts = 1, provider_ref = 'SM1' WHERE event_id = 'sent'`); err != nil {
		t.Fatal(err)
	}
	pc := connectAs(t, pool, smsApp)
	for _, c := range []struct{ event, want string }{
		{"due", "CANCELLED"}, {"later", "CANCELLED"}, {"due", "CANCELLED"},
		{"sending", "SENDING"}, {"doubt", "IN_DOUBT"}, {"sent", "SENT"}, {"never", ""},
	} {
		if got, code := cancel(pc, c.event, "sms"); got != c.want || code != "" {
			t.Errorf("cancel %s = %q %s, want %q", c.event, got, code, c.want)
		}
	}
	tx, err := pc.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, code := cancel(tx, "rolled-back", "sms"); got != "CANCELLED" || code != "" {
		t.Errorf("cancel in a transaction = %q %s", got, code)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	rows, _ := pool.Query(ctx, `SELECT event_id || '=' || status FROM effectd.intents WHERE channel = 'sms' ORDER BY event_id`)
	states, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := "doubt=IN_DOUBT due=CANCELLED later=CANCELLED rolled-back=PENDING sending=SENDING sent=SENT"; strings.Join(states, " ") != want {
		t.Errorf("intents = %v, want %s", states, want)
	}
	rows, _ = pool.Query(ctx, `SELECT a.actor || ' ' || a.action || ' ' || i.event_id || ' ' || a.reason || ' ' || (a.before ->> 'status') || '→' || (a.after ->> 'status')
FROM effectd.audit a JOIN effectd.intents i ON i.id = a.intent_id ORDER BY a.id`)
	audit, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{smsApp + " intent.cancel due order cancelled PENDING→CANCELLED", smsApp + " intent.cancel later order cancelled PENDING→CANCELLED"}; fmt.Sprint(audit) != fmt.Sprint(want) {
		t.Errorf("audit = %q, want %q", audit, want)
	}
	rows, _ = pool.Query(ctx, `SELECT (payload #>> '{intent,event_id}') || ' ' || (payload ->> 'type') FROM effectd.intents WHERE channel = 'sms-notify' ORDER BY 1`)
	notes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := "due effect.cancelled|later effect.cancelled"; strings.Join(notes, "|") != want {
		t.Errorf("notifications = %q, want %s", notes, want)
	}
	var counted int
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(n), 0) FROM effectd.intent_count_deltas WHERE channel = 'sms' AND status = 'CANCELLED'`).Scan(&counted); err != nil || counted != 2 {
		t.Errorf("CANCELLED counted %d, %v; want 2", counted, err)
	}
}

// TestStatus answers an intent's state, attempts, provider reference,
// delivery, last error class and next attempt, never the error's text; no row
// for an event the channel does not hold.
func TestStatus(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO effectd.channels (name, provider) VALUES ('sms', 'twilio')`); err != nil {
		t.Fatal(err)
	}
	for _, e := range []string{"e1", "e2"} {
		if code, msg := enqueue(pool, e, "sms", smsPayload); code != "" {
			t.Fatal(code, msg)
		}
	}
	if _, err := pool.Exec(ctx, `
UPDATE effectd.intents SET status = 'SENT', attempts = 2, provider_ref = 'SM1', delivery = 'delivered',
    last_error = 'the number +15005550006 is unreachable' WHERE event_id = 'e1';
INSERT INTO effectd.attempts (intent_id, attempt, started_at, outcome, error)
SELECT id, 1, now(), 'retry', 'the number +15005550006 is unreachable' FROM effectd.intents WHERE event_id = 'e1'`); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		Status, Ref, Delivery, Class string
		Attempts                     int
		Due                          bool
	}
	read := func(event string) (a answer, err error) {
		err = pool.QueryRow(ctx, statusSQL, event, "sms").Scan(&a.Status, &a.Attempts, &a.Ref, &a.Delivery, &a.Class, &a.Due)
		return a, err
	}
	if a, err := read("e1"); err != nil || a != (answer{"SENT", "SM1", "delivered", "retry", 2, false}) {
		t.Errorf("status e1 = %+v, %v", a, err)
	}
	if a, err := read("e2"); err != nil || a != (answer{Status: "PENDING", Due: true}) {
		t.Errorf("status e2 = %+v, %v", a, err)
	}
	if _, err := read("none"); err != pgx.ErrNoRows {
		t.Errorf("status of an event the channel does not hold: %v, want no row", err)
	}
	var cols []string
	rows, _ := pool.Query(ctx, `SELECT * FROM effectd.status('e1', 'sms')`)
	for _, f := range rows.FieldDescriptions() {
		cols = append(cols, f.Name)
	}
	rows.Close()
	if strings.Contains(strings.Join(cols, " "), "last_error ") || strings.Contains(strings.Join(cols, " "), "payload") {
		t.Errorf("status answers %v: a field that may hold redacted values", cols)
	}
}

// manyRows is a batch of n sms intents e0..e(n-1) with the given payloads
// replaced at their positions (0-based).
func manyRows(n int, payloads map[int]string) (events, channels, bodies []string) {
	for i := range n {
		events = append(events, fmt.Sprintf("e%d", i))
		channels = append(channels, "sms")
		bodies = append(bodies, cmpOr(payloads[i], smsPayload))
	}
	return events, channels, bodies
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestEnqueueMany10000: a batch of 10,000 with duplicates (of intents
// recorded before and within the batch) and a bad row is refused whole,
// naming the bad row and why, and records nothing; with keep_valid the
// answer names each row and the database holds exactly the new valid ones.
func TestEnqueueMany10000(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO effectd.channels (name, provider) VALUES ('sms', 'twilio')`); err != nil {
		t.Fatal(err)
	}
	for _, e := range []string{"e3", "e9000"} {
		if code, msg := enqueue(pool, e, "sms", smsPayload); code != "" {
			t.Fatal(code, msg)
		}
	}
	const n = 10_000
	events, channels, bodies := manyRows(n, map[int]string{5123: `{"to": "+15005550006"}`})
	events[7000], events[7001] = "e42", "e42" // e42 three times in the batch
	channels[9999] = "nope"

	_, err := pool.Exec(ctx, manySQL, events, channels, bodies, false)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22023" || !strings.Contains(pgErr.Message, "#5124 ") || !strings.Contains(pgErr.Message, "body") ||
		!strings.Contains(pgErr.Message, "#10000 ") || !strings.Contains(pgErr.Message, "unknown channel") {
		t.Fatalf("a batch with bad rows = %v, want 22023 naming rows 5124 (body) and 10000 (channel)", err)
	}
	var detail []struct {
		Ord            int
		Field, Message string
	}
	if err := json.Unmarshal([]byte(pgErr.Detail), &detail); err != nil || len(detail) != 2 || detail[0].Ord != 5124 || detail[0].Field != "payload.body" || detail[1].Field != "channel" {
		t.Errorf("detail = %s (%v), want rows 5124 payload.body and 10000 channel", pgErr.Detail, err)
	}
	var intents, keys int
	count := func() {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM effectd.intents), (SELECT count(*) FROM effectd.dedupe_keys)`).Scan(&intents, &keys); err != nil {
			t.Fatal(err)
		}
	}
	if count(); intents != 2 || keys != 2 {
		t.Fatalf("after the refused batch: %d intents, %d keys; want the 2 from before", intents, keys)
	}

	rows, _ := pool.Query(ctx, manySQL, events, channels, bodies, true)
	type answer struct {
		Ord                     int
		Outcome, Field, Message string
	}
	answers, err := pgx.CollectRows(rows, pgx.RowToStructByPos[answer])
	if err != nil {
		t.Fatal(err)
	}
	if len(answers) != n {
		t.Fatalf("%d answers, want %d", len(answers), n)
	}
	tally := map[string]int{}
	for i, a := range answers {
		tally[a.Outcome]++
		if a.Ord != i+1 {
			t.Fatalf("answer %d has ord %d", i, a.Ord)
		}
		want := "new"
		switch i {
		case 3, 9000, 7000, 7001: // recorded before; e42's second and third
			want = "duplicate"
		case 5123, 9999:
			want = "invalid"
		}
		if a.Outcome != want {
			t.Errorf("row %d (%s/%s): %s %s %s, want %s", i+1, channels[i], events[i], a.Outcome, a.Field, a.Message, want)
		}
	}
	if a := answers[5123]; a.Field != "payload.body" || !strings.Contains(a.Message, "body") {
		t.Errorf("row 5124 = %+v, want payload.body named", a)
	}
	if count(); intents != 2+n-6 || keys != intents {
		t.Errorf("after keep_valid: %d intents, %d keys; want %d each (%v)", intents, keys, 2+n-6, tally)
	}
	var missing int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM unnest($1::text[]) AS e WHERE e NOT IN ('e5123') AND NOT EXISTS (SELECT 1 FROM effectd.intents i WHERE i.event_id = e AND i.channel = 'sms')`, events[:9999]).Scan(&missing); err != nil || missing != 0 {
		t.Errorf("%d valid events without an intent, %v", missing, err)
	}
}
