package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
)

// inTx runs f in a transaction of pool and commits it.
func inTx(t *testing.T, pool *pgxpool.Pool, f func(tx pgx.Tx) error) error {
	t.Helper()
	return pgx.BeginFunc(context.Background(), pool, f)
}

// TestCancelRacesClaim: producers cancel intents while a dispatcher claims
// and sends them. Each intent ends either CANCELLED, its cancel having
// answered CANCELLED, with no provider call, or sent once, its cancel having
// answered the status the claim left (SENDING or later): exactly one wins, and
// nothing is sent after a successful cancel. Half the cancels hold their
// transaction open until the others are done, the claimer meanwhile passing
// over their locked rows.
func TestCancelRacesClaim(t *testing.T) {
	t.Parallel()
	p := &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) { return "ref-" + key, nil }}
	r := start(t, "webhook", p, fastPolicy("webhook"))
	cancelRace(t, r.pool, p, func(int) *int64 { return nil })
}

// cancelRace records 60 intents on channel "c" (intent i on bucket
// bucketOf(i)) while the channel is paused, then cancels each in a
// transaction of its own as the dispatcher with provider p resumes, and
// checks that exactly one of the cancel and the send won each.
func cancelRace(t *testing.T, pool *pgxpool.Pool, p *scripted, bucketOf func(i int) *int64) {
	t.Helper()
	ctx := context.Background()
	const n = 60
	// paused while the intents are recorded, resumed as the cancels start
	if _, err := pool.Exec(ctx, `UPDATE effectd.channels SET paused = true WHERE name = 'c'`); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		in := dispatcher.Intent{EventID: fmt.Sprintf("e%d", i), Channel: "c", Payload: `{}`}
		if err := inTx(t, pool, func(tx pgx.Tx) error {
			_, err := dispatcher.EnqueueMany(ctx, tx, []dispatcher.Intent{in}, dispatcher.BatchOptions{Bucket: bucketOf(i)})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// a pool of its own: every cancel may hold a connection at once
	cfg := pool.Config().Copy()
	cfg.MaxConns = n + 1
	producers, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer producers.Close()
	answers := make([]string, n)
	held := make(chan struct{})
	var evens, odds sync.WaitGroup
	for i := range n {
		wg := &evens
		if i%2 == 1 {
			wg = &odds
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := inTx(t, producers, func(tx pgx.Tx) error {
				var err error
				key := dispatcher.IntentKey{EventID: fmt.Sprintf("e%d", i), Channel: "c", Bucket: bucketOf(i)}
				answers[i], err = dispatcher.Cancel(ctx, tx, key, "order cancelled")
				if i%2 == 1 {
					<-held
				}
				return err
			})
			if err != nil {
				t.Errorf("cancel e%d: %v", i, err)
			}
		}()
	}
	if _, err := pool.Exec(ctx, `UPDATE effectd.channels SET paused = false WHERE name = 'c'`); err != nil {
		t.Fatal(err)
	}
	evens.Wait()
	close(held)
	odds.Wait()

	won := 0
	for i := range n {
		event := fmt.Sprintf("e%d", i)
		var got string
		eventually(t, 30*time.Second, event+" settles", func() bool {
			if err := pool.QueryRow(ctx, `SELECT status FROM effectd.intents WHERE event_id = $1 AND channel = 'c'`, event).Scan(&got); err != nil {
				t.Fatal(err)
			}
			return got == "SENT" || got == "CANCELLED"
		})
		calls := p.Calls("c:" + event)
		switch {
		case answers[i] == "CANCELLED":
			won++
			if got != "CANCELLED" || calls != 0 {
				t.Errorf("%s: cancel answered CANCELLED, but the intent is %s after %d calls", event, got, calls)
			}
		case answers[i] == "SENDING" || answers[i] == "SENT":
			if got != "SENT" || calls != 1 {
				t.Errorf("%s: cancel answered %s, and the intent is %s after %d calls; want SENT once", event, answers[i], got, calls)
			}
		default:
			t.Errorf("%s: cancel answered %q", event, answers[i])
		}
	}
	t.Logf("cancels won %d of %d", won, n)
}

// TestProducerVerbsGo: the Go client's Cancel, Status and EnqueueMany in the
// caller's transaction: a rolled-back cancel leaves the intent PENDING, a
// committed one answers CANCELLED again, and Status reads what it is.
func TestProducerVerbsGo(t *testing.T) {
	t.Parallel()
	r := start(t, "webhook", &scripted{calls: map[string]int{}}, fastPolicy("webhook"))
	ctx := context.Background()
	if _, err := r.pool.Exec(ctx, `UPDATE effectd.channels SET paused = true WHERE name = 'c'`); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	key := dispatcher.IntentKey{EventID: "e1", Channel: "c"}
	if err := inTx(t, r.pool, func(tx pgx.Tx) error {
		res, err := dispatcher.EnqueueMany(ctx, tx, []dispatcher.Intent{
			{EventID: "e1", Channel: "c", Payload: `{}`, NotBefore: later},
			{EventID: "e1", Channel: "c", Payload: `{}`},
		}, dispatcher.BatchOptions{})
		if err == nil && (res[0].Outcome != dispatcher.BatchNew || res[1].Outcome != dispatcher.BatchDuplicate) {
			err = fmt.Errorf("answers %+v", res)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s, err := dispatcher.Status(ctx, r.pool, key)
	if err != nil || s.Status != "PENDING" || s.NextAttemptAt == nil || s.NextAttemptAt.Before(later.Add(-time.Second)) {
		t.Fatalf("Status = %+v, %v; want PENDING, due in an hour", s, err)
	}
	rollback := errors.New("the order stays")
	if err := inTx(t, r.pool, func(tx pgx.Tx) error {
		if got, err := dispatcher.Cancel(ctx, tx, key, "order cancelled"); err != nil || got != "CANCELLED" {
			t.Errorf("Cancel = %q, %v", got, err)
		}
		return rollback
	}); err != rollback {
		t.Fatal(err)
	}
	if s, err := dispatcher.Status(ctx, r.pool, key); err != nil || s.Status != "PENDING" {
		t.Fatalf("after a rolled-back cancel: %+v, %v; want PENDING", s, err)
	}
	for range 2 {
		if got, err := dispatcher.Cancel(ctx, r.pool, key, "order cancelled"); err != nil || got != "CANCELLED" {
			t.Errorf("Cancel = %q, %v; want CANCELLED", got, err)
		}
	}
	if _, err := dispatcher.Cancel(ctx, r.pool, dispatcher.IntentKey{EventID: "none", Channel: "c"}, "x"); !errors.Is(err, dispatcher.ErrNotFound) {
		t.Errorf("Cancel of no intent: %v, want ErrNotFound", err)
	}
	if _, err := dispatcher.Status(ctx, r.pool, dispatcher.IntentKey{EventID: "none", Channel: "c"}); !errors.Is(err, dispatcher.ErrNotFound) {
		t.Errorf("Status of no intent: %v, want ErrNotFound", err)
	}
	var bad *dispatcher.InputError
	if _, err := dispatcher.Cancel(ctx, r.pool, key, ""); !errors.As(err, &bad) || bad.Field != "reason" {
		t.Errorf("Cancel without a reason: %v, want an InputError naming reason", err)
	}
}

// TestEnqueueManyGo: a batch of 10,000 with duplicates and bad rows (one
// refused by Go, one by the database) is refused whole with a *BatchError
// naming both; with KeepValid each row is answered and exactly the new valid
// ones are recorded.
func TestEnqueueManyGo(t *testing.T) {
	t.Parallel()
	r := start(t, "webhook", &scripted{calls: map[string]int{}}, fastPolicy("webhook"))
	ctx := context.Background()
	if _, err := r.pool.Exec(ctx, `UPDATE effectd.channels SET paused = true WHERE name = 'c'`); err != nil {
		t.Fatal(err)
	}
	r.enqueue(t, "e10")
	const n = 10_000
	intents := make([]dispatcher.Intent, n)
	for i := range intents {
		intents[i] = dispatcher.Intent{EventID: fmt.Sprintf("e%d", i), Channel: "c", Payload: `{}`}
	}
	intents[20].EventID = "e5"        // a duplicate within the batch
	intents[300].Payload = `[1]`      // refused by the database
	intents[4000].EventID = "bad\x00" // refused in Go
	err := inTx(t, r.pool, func(tx pgx.Tx) error {
		_, err := dispatcher.EnqueueMany(ctx, tx, intents, dispatcher.BatchOptions{})
		return err
	})
	var be *dispatcher.BatchError
	if !errors.As(err, &be) || len(be.Rows) != 1 || be.Rows[0].Index != 4000 {
		t.Fatalf("a batch with a row Go refuses: %v, want a BatchError naming [4000]", err)
	}
	intents[4000].EventID = "e4000"
	err = inTx(t, r.pool, func(tx pgx.Tx) error {
		_, err := dispatcher.EnqueueMany(ctx, tx, intents, dispatcher.BatchOptions{})
		return err
	})
	if !errors.As(err, &be) || len(be.Rows) != 1 || be.Rows[0].Index != 300 || be.Rows[0].Field != "payload" {
		t.Fatalf("a batch with a row the database refuses: %v, want a BatchError naming [300] payload", err)
	}
	var count int
	if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents`).Scan(&count); err != nil || count != 1 {
		t.Fatalf("after refused batches: %d intents, %v; want 1", count, err)
	}
	var res []dispatcher.BatchResult
	if err := inTx(t, r.pool, func(tx pgx.Tx) error {
		res, err = dispatcher.EnqueueMany(ctx, tx, intents, dispatcher.BatchOptions{KeepValid: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for i, a := range res {
		want := dispatcher.BatchNew
		switch i {
		case 10, 20:
			want = dispatcher.BatchDuplicate
		case 300:
			want = dispatcher.BatchInvalid
		}
		if a.Outcome != want {
			t.Errorf("[%d] %+v, want %s", i, a, want)
		}
	}
	if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents`).Scan(&count); err != nil || count != n-2 {
		t.Fatalf("after KeepValid: %d intents, %v; want %d", count, err, n-2)
	}
}
