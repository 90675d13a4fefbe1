package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/migrations"
	"github.com/effectd/effectd/policy"
)

// toOtherDaySQL moves the intent of event $1 on channel hook into the
// partition of the day after tomorrow: the row an enqueue in a transaction
// that began on another day would have written.
const toOtherDaySQL = `UPDATE effectd.intents SET created_at = now() + interval '2 days' WHERE event_id = $1 AND channel = 'hook'`

// TestEnqueueDedupesAcrossPartitions: an event whose intent is in another day's
// partition is a duplicate, whatever the payload, and inserts nothing.
func TestEnqueueDedupesAcrossPartitions(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	ctx := context.Background()
	if ok, err := enqueue(t, pool, dispatcher.Intent{EventID: "evt-1", Channel: "hook", Payload: `{}`}); err != nil || !ok {
		t.Fatalf("first enqueue = %v, %v", ok, err)
	}
	if _, err := pool.Exec(ctx, toOtherDaySQL, "evt-1"); err != nil {
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

// TestEnqueueWaitsForTheSameEvent: while another transaction holds an
// uncommitted intent of the same event, in another day's partition, an
// enqueue waits for it and then finds it (READ COMMITTED); it does not insert
// a second intent beside it.
func TestEnqueueWaitsForTheSameEvent(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	ctx := context.Background()
	first, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback(ctx)
	if _, err := dispatcher.Enqueue(ctx, first, dispatcher.Intent{EventID: "evt-2", Channel: "hook", Payload: `{}`}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Exec(ctx, toOtherDaySQL, "evt-2"); err != nil {
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
	waitForLock(t, pool)
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

// TestEnqueueAfterRollbackOfTheSameEvent: an enqueue that waited for another
// transaction's uncommitted copy of its event inserts once that one rolls
// back, at every isolation level.
func TestEnqueueAfterRollbackOfTheSameEvent(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	ctx := context.Background()
	for _, iso := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable} {
		event := "evt-rb-" + string(iso)
		first, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dispatcher.Enqueue(ctx, first, dispatcher.Intent{EventID: event, Channel: "hook", Payload: `{}`}); err != nil {
			t.Fatal(err)
		}
		tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		var ok bool
		go func() {
			var err error
			ok, err = dispatcher.Enqueue(ctx, tx, dispatcher.Intent{EventID: event, Channel: "hook", Payload: `{}`})
			if err == nil {
				err = tx.Commit(ctx)
			}
			done <- err
		}()
		waitForLock(t, pool)
		if err := first.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil || !ok {
			t.Fatalf("%s: enqueue after the other copy rolled back = %v, %v; want true", iso, ok, err)
		}
		tx.Rollback(ctx)
	}
	if n := count(t, pool); n != 3 {
		t.Fatalf("%d intents, want 3", n)
	}
}

// TestEnqueueDedupeAtEveryIsolationLevel: a producer whose REPEATABLE READ or
// SERIALIZABLE snapshot predates another transaction's committed enqueue of
// the same event, in another day's partition, or that waited for such an
// enqueue to commit, is refused with serialization_failure (40001, retryable)
// and never inserts a second intent; its retry finds the event a duplicate.
func TestEnqueueDedupeAtEveryIsolationLevel(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	ctx := context.Background()
	for _, iso := range []pgx.TxIsoLevel{pgx.RepeatableRead, pgx.Serializable} {
		for _, waited := range []bool{false, true} {
			event := fmt.Sprintf("evt-%s-%v", iso, waited)
			tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `SELECT 1`); err != nil { // the snapshot
				t.Fatal(err)
			}
			other, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := dispatcher.Enqueue(ctx, other, dispatcher.Intent{EventID: event, Channel: "hook", Payload: `{}`}); err != nil {
				t.Fatal(err)
			}
			if _, err := other.Exec(ctx, toOtherDaySQL, event); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			var ok bool
			enq := func() {
				var err error
				ok, err = dispatcher.Enqueue(ctx, tx, dispatcher.Intent{EventID: event, Channel: "hook", Payload: `{}`})
				if err == nil {
					err = tx.Commit(ctx)
				}
				done <- err
			}
			if waited {
				go enq()
				waitForLock(t, pool)
				if err := other.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := other.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				enq()
			}
			err = <-done
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "40001" {
				t.Fatalf("%s (waited %v): enqueue of an event committed after the snapshot = %v, %v; want SQLSTATE 40001", iso, waited, ok, err)
			}
			tx.Rollback(ctx)
			if retry, err := enqueue(t, pool, dispatcher.Intent{EventID: event, Channel: "hook", Payload: `{}`}); err != nil || retry {
				t.Fatalf("%s: the retry = %v, %v; want a duplicate", iso, retry, err)
			}
			var n int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE event_id = $1`, event).Scan(&n); err != nil || n != 1 {
				t.Fatalf("%s: %d intents of one event, %v", iso, n, err)
			}
		}
	}
}

// TestEnqueueManyInOneTransaction: one producer transaction of 100,000
// enqueues commits on PostgreSQL's default max_connections and
// max_locks_per_transaction (a lock table of 6,400 entries): dedupe holds
// no lock per event.
func TestEnqueueManyInOneTransaction(t *testing.T) {
	t.Parallel()
	pg := pgtest.Cluster(t, "defaults", "max_connections=100", "max_locks_per_transaction=64")
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := migrations.New(pool).Up(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dispatcher.Register(ctx, pool, []dispatcher.Channel{{Name: "hook", Kind: "webhook", Policy: policy.Default("webhook")}}); err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	var fresh int
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE effectd.enqueue('bulk-' || g, 'hook', '{}'))
			FROM generate_series(1, $1) g`, n).Scan(&fresh)
	})
	if err != nil || fresh != n {
		t.Fatalf("%d enqueues in one transaction: %d new, %v", n, fresh, err)
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents`).Scan(&rows); err != nil || rows != n {
		t.Fatalf("%d intents after the commit, %v; want %d", rows, err, n)
	}
}

// waitForLock returns once a session of pool's database waits for a lock.
func waitForLock(t *testing.T, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting bool
		if err := pool.QueryRow(context.Background(),
			`SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			 WHERE NOT l.granted AND a.datname = current_database())`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no enqueue waits for the other transaction's copy of its event")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
