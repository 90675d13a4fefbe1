package dispatcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
)

// countingProvider answers every call at once and counts them.
type countingProvider struct{ calls atomic.Int64 }

func (p *countingProvider) Send(context.Context, string, json.RawMessage, map[string]string) (string, error) {
	p.calls.Add(1)
	return "ref", nil
}

// TestClaimsWaitForLaggingCompleters: while outcomes cannot be written (the
// attempts table is locked), the dispatcher stops claiming once its calls,
// the completion queue and the completers' batches are full, instead of
// calling the whole backlog and holding every outcome in memory. When the
// database is back, every intent is recorded SENT after exactly one call.
func TestClaimsWaitForLaggingCompleters(t *testing.T) {
	const (
		backlog     = 300
		concurrency = 4
		claimBatch  = 8
		completers  = 2
		// calls in flight + the completion queue (4 claims) + one batch per completer
		bound = concurrency + 4*claimBatch + completers*claimBatch
	)
	pool := pgtest.New(t)
	ctx := context.Background()
	pol := fastPolicy("webhook")
	pol.Concurrency = concurrency
	prov := &countingProvider{}
	chans := []dispatcher.Channel{{Name: "c", Kind: "webhook", Provider: prov, Policy: pol}}
	if err := dispatcher.Register(ctx, pool, chans); err != nil {
		t.Fatal(err)
	}
	for i := range backlog {
		if ok, err := enqueue(t, pool, dispatcher.Intent{EventID: fmt.Sprintf("bp-%d", i), Channel: "c", Payload: `{"n":1}`}); err != nil || !ok {
			t.Fatalf("enqueue: %v %v", ok, err)
		}
	}
	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, `LOCK TABLE effectd.attempts IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	run(t, pool, dispatcher.Config{Channels: chans, ClaimBatch: claimBatch, Completers: completers})

	eventually(t, 10*time.Second, "the first calls", func() bool { return prov.calls.Load() >= concurrency })
	// Without back-pressure the whole backlog is called within milliseconds;
	// give it a second to show, checking the bound all along.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if n := prov.calls.Load(); n > bound {
			t.Fatalf("%d calls while no outcome could be written; want at most %d", n, bound)
		}
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "every intent SENT", func() bool {
		var sent int
		pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE status = 'SENT'`).Scan(&sent)
		return sent == backlog
	})
	if n := prov.calls.Load(); n != backlog {
		t.Fatalf("%d calls for %d intents; want one each", n, backlog)
	}
}
