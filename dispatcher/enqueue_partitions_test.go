package dispatcher_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/effectd/effectd/dispatcher"
)

// dayAheadSQL inserts the intent of event $1 on channel hook into the
// partition of the day after tomorrow, as an enqueue in a transaction that
// began on another day than the test's would: the same row in another
// partition than the test's enqueues.
const dayAheadSQL = `INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key, created_at)
VALUES ($1, 'hook', '{}', 'hook:' || $1, now() + interval '2 days')`

// TestEnqueueDedupesAcrossPartitions: an event whose intent is in another day's
// partition is a duplicate, whatever the payload, and inserts nothing.
func TestEnqueueDedupesAcrossPartitions(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, dayAheadSQL, "evt-1"); err != nil {
		t.Fatal(err)
	}
	ok, err := enqueue(t, pool, dispatcher.Intent{EventID: "evt-1", Channel: "hook", Payload: `{"n": 2}`})
	if err != nil || ok {
		t.Fatalf("enqueue of an event held by another day's partition = %v, %v; want false, nil", ok, err)
	}
	if n := count(t, pool); n != 1 {
		t.Fatalf("%d intents, want the one of the other day", n)
	}
	// a duplicate's payload is still checked, as the insert would
	_, err = enqueue(t, pool, dispatcher.Intent{EventID: "evt-1", Channel: "hook", Payload: `[1]`})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "22023" {
		t.Fatalf("a duplicate with a payload that is not an object: %v, want refused", err)
	}
}

// TestEnqueueWaitsForTheSameEvent: while another transaction, in another day's
// partition, holds an uncommitted intent of the same event, an enqueue waits
// for it and then finds it (READ COMMITTED); it does not insert a second intent
// beside it.
func TestEnqueueWaitsForTheSameEvent(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	ctx := context.Background()
	first, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback(ctx)
	// what effectd.enqueue does in a transaction that began yesterday
	if _, err := first.Exec(ctx, `SELECT pg_advisory_xact_lock(1701209701, effectd.intent_lock_key('hook', 'evt-2'))`); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Exec(ctx, dayAheadSQL, "evt-2"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		ok  bool
		err error
	}
	second := make(chan result, 1)
	go func() {
		ok, err := enqueue(t, pool, dispatcher.Intent{EventID: "evt-2", Channel: "hook", Payload: `{}`})
		second <- result{ok, err}
	}()
	waitLockWait(t, pool)
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-second; r.err != nil || r.ok {
		t.Fatalf("the second enqueue of an event = %v, %v; want false, nil", r.ok, r.err)
	}
	if n := count(t, pool); n != 1 {
		t.Fatalf("%d intents of one event", n)
	}
}

// TestEnqueueRepeatableReadRetries: under REPEATABLE READ an enqueue that finds
// the event being enqueued by another transaction fails at once with
// serialization_failure (its snapshot could not see the other's row), so the
// producer runs its transaction again.
func TestEnqueueRepeatableReadRetries(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	ctx := context.Background()
	first, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback(ctx)
	if _, err := dispatcher.Enqueue(ctx, first, dispatcher.Intent{EventID: "evt-3", Channel: "hook", Payload: `{}`}); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = '5s'`); err != nil {
		t.Fatal(err)
	}
	_, err = dispatcher.Enqueue(ctx, tx, dispatcher.Intent{EventID: "evt-3", Channel: "hook", Payload: `{}`})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "40001" {
		t.Fatalf("enqueue under REPEATABLE READ beside an uncommitted copy: %v, want SQLSTATE 40001 at once", err)
	}
}

// waitLockWait returns once a session of pool waits for an advisory lock.
func waitLockWait(t *testing.T, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting bool
		if err := pool.QueryRow(context.Background(),
			`SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no enqueue waits for the advisory lock of its event")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
