package dispatcher_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/policy"
)

// registered returns a database with a webhook, a stripe and a twilio channel.
func registered(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.New(t)
	var chans []dispatcher.Channel
	for name, kind := range map[string]string{"hook": "webhook", "refund": "stripe", "sms": "twilio"} {
		chans = append(chans, dispatcher.Channel{Name: name, Kind: kind, Policy: policy.Default(kind)})
	}
	if err := dispatcher.Register(context.Background(), pool, chans); err != nil {
		t.Fatal(err)
	}
	return pool
}

func enqueue(t *testing.T, pool *pgxpool.Pool, in dispatcher.Intent) (bool, error) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	ok, err := dispatcher.Enqueue(ctx, tx, in)
	if err == nil {
		if cerr := tx.Commit(ctx); cerr != nil {
			t.Fatal(cerr)
		}
	}
	return ok, err
}

func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM effectd.intents`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestEnqueueDuplicate(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	in := dispatcher.Intent{EventID: "evt-1", Channel: "hook", Payload: map[string]any{"a": 1}}
	for i, want := range []bool{true, false, false} {
		got, err := enqueue(t, pool, in)
		if err != nil || got != want {
			t.Fatalf("enqueue #%d = %v, %v; want %v", i+1, got, err, want)
		}
	}
	// Same event on another channel is another intent.
	if got, err := enqueue(t, pool, dispatcher.Intent{EventID: "evt-1", Channel: "sms", Payload: `{"to":"+15005550006","body":"hi"}`}); err != nil || !got {
		t.Fatalf("other channel: %v, %v", got, err)
	}
	var key, status string
	if err := pool.QueryRow(context.Background(), `SELECT idempotency_key, status FROM effectd.intents WHERE event_id='evt-1' AND channel='hook'`).Scan(&key, &status); err != nil {
		t.Fatal(err)
	}
	if key != "hook:evt-1" || status != "PENDING" {
		t.Fatalf("key, status = %q, %q", key, status)
	}
	if n := count(t, pool); n != 2 {
		t.Fatalf("intents = %d, want 2", n)
	}
}

func TestEnqueueRollbackLeavesNothing(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) // a failed check must not leave the transaction open
	if ok, err := dispatcher.Enqueue(ctx, tx, dispatcher.Intent{EventID: "e", Channel: "hook", Payload: `{}`}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool); n != 0 {
		t.Fatalf("intents after rollback = %d", n)
	}
}

func TestEnqueueLongEventIDKeyIsHashed(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	id := strings.Repeat("x", 252) // "hook:" + 252 bytes > 255
	if ok, err := enqueue(t, pool, dispatcher.Intent{EventID: id, Channel: "hook", Payload: `{}`}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	var key string
	pool.QueryRow(context.Background(), `SELECT idempotency_key FROM effectd.intents`).Scan(&key)
	if !strings.HasPrefix(key, "hook:sha256:") || len(key) != len("hook:sha256:")+64 {
		t.Fatalf("key = %q", key)
	}
}

// TestEnqueueBadInput: every bad input of the contract is refused with 22023,
// a message naming the field, and nothing inserted.
func TestEnqueueBadInput(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	if ok, err := enqueue(t, pool, dispatcher.Intent{EventID: "keep", Channel: "hook", Payload: `{"a":1}`}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	big := `{"x":"` + strings.Repeat("a", 70<<10) + `"}`
	cases := []struct {
		name  string
		in    dispatcher.Intent
		field string
	}{
		{"empty event_id", dispatcher.Intent{EventID: "", Channel: "hook", Payload: `{}`}, "event_id"},
		{"long event_id", dispatcher.Intent{EventID: strings.Repeat("e", 256), Channel: "hook", Payload: `{}`}, "event_id"},
		{"unknown channel", dispatcher.Intent{EventID: "e", Channel: "nope", Payload: `{}`}, "channel"},
		{"array payload", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: `[1,2]`}, "payload"},
		{"string payload", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: `"x"`}, "payload"},
		{"invalid json", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: `{`}, "payload"},
		{"oversized payload", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: big}, "payload"},
		{"sms without to", dispatcher.Intent{EventID: "e", Channel: "sms", Payload: `{"body":"hi"}`}, "payload.to"},
		{"sms empty body", dispatcher.Intent{EventID: "e", Channel: "sms", Payload: `{"to":"+15005550006","body":""}`}, "payload.body"},
		{"sms numeric to", dispatcher.Intent{EventID: "e", Channel: "sms", Payload: `{"to":15005550006,"body":"x"}`}, "payload.to"},
		{"stripe unknown type", dispatcher.Intent{EventID: "e", Channel: "refund", Payload: `{"type":"charge"}`}, "payload.type"},
		{"stripe no type", dispatcher.Intent{EventID: "e", Channel: "refund", Payload: `{"amount":5}`}, "payload.type"},
		{"refund without target", dispatcher.Intent{EventID: "e", Channel: "refund", Payload: `{"type":"refund","amount":5}`}, "payload.payment_intent"},
		{"refund zero amount", dispatcher.Intent{EventID: "e", Channel: "refund", Payload: `{"type":"refund","payment_intent":"pi_1","amount":0}`}, "payload.amount"},
		{"refund negative amount", dispatcher.Intent{EventID: "e", Channel: "refund", Payload: `{"type":"refund","payment_intent":"pi_1","amount":-5}`}, "payload.amount"},
		{"refund fractional amount", dispatcher.Intent{EventID: "e", Channel: "refund", Payload: `{"type":"refund","payment_intent":"pi_1","amount":1.5}`}, "payload.amount"},
		{"payment intent without currency", dispatcher.Intent{EventID: "e", Channel: "refund", Payload: `{"type":"payment_intent","amount":100}`}, "payload.currency"},
		{"transfer without destination", dispatcher.Intent{EventID: "e", Channel: "refund", Payload: `{"type":"transfer","amount":100,"currency":"usd"}`}, "payload.destination"},
		{"occurred long ago", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: `{}`, OccurredAt: time.Now().Add(-400 * time.Hour)}, "occurred_at"},
	}
	for _, c := range cases {
		ok, err := enqueue(t, pool, c.in)
		var ie *dispatcher.InputError
		if !errors.As(err, &ie) {
			t.Errorf("%s: got %v, %v; want an InputError", c.name, ok, err)
			continue
		}
		var pgErr *pgconn.PgError
		if c.name != "invalid json" && (!errors.As(err, &pgErr) || pgErr.Code != "22023") {
			t.Errorf("%s: want SQLSTATE 22023, got %v", c.name, err)
		}
		if ie.Field != c.field || !strings.Contains(ie.Message, c.field) {
			t.Errorf("%s: field %q, message %q; want field %q named in the message", c.name, ie.Field, ie.Message, c.field)
		}
	}
	if n := count(t, pool); n != 1 {
		t.Fatalf("intents = %d after bad input, want the 1 already there", n)
	}
}

// TestEnqueueSQLFunction calls effectd.enqueue as a producer in another language
// would, and through database/sql with the SQLTx adapter.
func TestEnqueueSQLFunction(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	ctx := context.Background()
	var first, second bool
	q := `SELECT effectd.enqueue(event_id => $1, channel => $2, payload => $3::jsonb)`
	if err := pool.QueryRow(ctx, q, "sql-1", "hook", `{"k":"v"}`).Scan(&first); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, q, "sql-1", "hook", `{"k":"v"}`).Scan(&second); err != nil {
		t.Fatal(err)
	}
	if !first || second {
		t.Fatalf("enqueue twice = %v, %v; want true, false", first, second)
	}
	var notBefore time.Time
	if err := pool.QueryRow(ctx, `SELECT effectd.enqueue(event_id => 'later', channel => 'hook', payload => '{}', not_before => now() + interval '1 hour', ordering_key => 'k1')`).Scan(&first); err != nil {
		t.Fatal(err)
	}
	pool.QueryRow(ctx, `SELECT next_attempt_at FROM effectd.intents WHERE event_id = 'later'`).Scan(&notBefore)
	if time.Until(notBefore) < 50*time.Minute {
		t.Fatalf("not_before ignored: next_attempt_at = %v", notBefore)
	}

	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ok, err := dispatcher.Enqueue(ctx, dispatcher.SQLTx{Tx: tx}, dispatcher.Intent{EventID: "sql-2", Channel: "hook", Payload: json.RawMessage(`{}`)})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	_, err = dispatcher.Enqueue(ctx, dispatcher.SQLTx{Tx: tx}, dispatcher.Intent{EventID: "", Channel: "hook", Payload: `{}`})
	var ie *dispatcher.InputError
	if !errors.As(err, &ie) || ie.Field != "event_id" {
		t.Fatalf("bad input through database/sql: %v", err)
	}
	tx.Rollback()
}
