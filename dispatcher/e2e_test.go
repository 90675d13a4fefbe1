package dispatcher_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/providers/sandbox"
	"github.com/effectd/effectd/providers/webhook"
)

// TestEndToEndExactlyOnce: 1,000 events, 10% delivered twice, enqueued by
// concurrent producers in their own transactions, some rolled back. Every
// committed (event, channel) gets exactly one intent and is applied exactly once
// at the sandbox receiver; rolled-back ones leave nothing.
func TestEndToEndExactlyOnce(t *testing.T) {
	t.Parallel()
	const (
		events    = 1000
		producers = 8
		secret    = "whsec_ZWZmZWN0ZC10ZXN0LXNlY3JldC1rZXktMTIzNA=="
	)
	sb := sandbox.New(sandbox.Options{WebhookSecret: secret})
	srv := httptest.NewServer(sb.Handler())
	defer srv.Close()
	wh, err := webhook.New(webhook.Config{URL: srv.URL + "/hooks/e2e", Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	pool := pgtest.New(t)
	ctx := context.Background()
	pol := policy.Default("webhook")
	pol.Concurrency = 64
	chans := []dispatcher.Channel{{Name: "hook", Kind: "webhook", Provider: wh, Policy: pol}}
	run(t, pool, dispatcher.Config{Channels: chans})

	// Deliveries: every event once, 10% twice, shuffled; each delivery is a
	// producer transaction that rolls back with probability 1/10.
	type delivery struct {
		event    string
		rollback bool
	}
	var deliveries []delivery
	for i := range events {
		id := fmt.Sprintf("evt-%04d", i)
		deliveries = append(deliveries, delivery{id, rand.N(10) == 0})
		if i%10 == 0 {
			deliveries = append(deliveries, delivery{id, rand.N(10) == 0})
		}
	}
	rand.Shuffle(len(deliveries), func(i, j int) { deliveries[i], deliveries[j] = deliveries[j], deliveries[i] })

	var mu sync.Mutex
	committed := map[string]bool{}
	inserted := 0
	work := make(chan delivery)
	var wg sync.WaitGroup
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// deliver runs one producer transaction; it reports whether the
			// event was committed and whether it was new.
			deliver := func(dl delivery) (committed, ok bool, err error) {
				tx, err := pool.Begin(ctx)
				if err != nil {
					return false, false, err
				}
				defer tx.Rollback(ctx)
				ok, err = dispatcher.Enqueue(ctx, tx, dispatcher.Intent{EventID: dl.event, Channel: "hook",
					Payload: map[string]any{"event": dl.event}})
				if err != nil || dl.rollback {
					return false, false, err
				}
				return true, ok, tx.Commit(ctx)
			}
			for dl := range work {
				done, ok, err := deliver(dl)
				if err != nil {
					t.Error(err)
					return
				}
				if !done {
					continue
				}
				mu.Lock()
				committed[dl.event] = true
				if ok {
					inserted++
				}
				mu.Unlock()
			}
		}()
	}
	for _, dl := range deliveries {
		work <- dl
	}
	close(work)
	wg.Wait()
	if inserted != len(committed) {
		t.Fatalf("enqueue reported %d new intents for %d committed events", inserted, len(committed))
	}

	eventually(t, 60*time.Second, "every committed intent SENT", func() bool {
		var n int
		pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE status = 'SENT'`).Scan(&n)
		return n == len(committed)
	})
	var rows int
	pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents`).Scan(&rows)
	if rows != len(committed) {
		t.Fatalf("intents = %d, committed events = %d", rows, len(committed))
	}
	snap := sb.Ledger.Snapshot("webhook")
	applied := map[string]int{}
	for _, e := range snap.Effects {
		applied[e.Key] += e.Applied
	}
	for ev := range committed {
		if n := applied["hook:"+ev]; n != 1 {
			t.Errorf("event %s applied %d times, want 1", ev, n)
		}
	}
	if len(applied) != len(committed) {
		t.Errorf("receiver applied %d keys, committed %d events", len(applied), len(committed))
	}
	// The receiver applies a webhook-id once, so effects show losses but not
	// duplicates: every committed event must also have been delivered once.
	var repeated []string
	for _, c := range snap.Calls {
		if !c.Applied {
			repeated = append(repeated, fmt.Sprintf("%s (status %d)", c.Key, c.Status))
		}
	}
	if len(repeated) > 0 || len(snap.Calls) != len(committed) {
		t.Errorf("%d deliveries for %d events; not applied: %v", len(snap.Calls), len(committed), repeated)
	}
	t.Logf("%d deliveries, %d committed events, %d effects applied once each", len(deliveries), len(committed), len(applied))
}
