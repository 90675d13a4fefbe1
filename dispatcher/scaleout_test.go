package dispatcher_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
)

// TestScaleOutNoDoubleClaims: three dispatchers on one database share a
// backlog; every intent is called exactly once, and each instance takes part.
func TestScaleOutNoDoubleClaims(t *testing.T) {
	t.Parallel()
	const n, instances = 3000, 3
	pool := pgtest.New(t)
	ctx := context.Background()
	var mu sync.Mutex
	calls := map[string]int{}
	by := map[int]int{}
	pol := fastPolicy("webhook")
	pol.Concurrency = 32
	fixture.Intents(t, pool, n, func(g int) []fixture.IntentOption {
		return []fixture.IntentOption{fixture.Event(fmt.Sprintf("e%d", g)), fixture.Channel("c")}
	})
	for i := range instances {
		p := providerFunc(func(ctx context.Context, key string) (string, error) {
			mu.Lock()
			calls[key]++
			by[i]++
			mu.Unlock()
			return "ref-" + key, nil
		})
		// Small claims, so that the instances interleave.
		run(t, pool, dispatcher.Config{Channels: []dispatcher.Channel{{Name: "c", Kind: "webhook", Provider: p, Policy: pol}}, ClaimBatch: 16})
	}
	eventually(t, 60*time.Second, "every intent SENT", func() bool {
		var sent int
		pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE status = 'SENT'`).Scan(&sent)
		return sent == n
	})
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != n {
		t.Fatalf("%d keys called, want %d", len(calls), n)
	}
	for k, c := range calls {
		if c != 1 {
			t.Errorf("key %s called %d times", k, c)
		}
	}
	for i := range instances {
		if by[i] == 0 {
			t.Errorf("instance %d made no call: %v", i, by)
		}
	}
	var attempts int
	pool.QueryRow(ctx, `SELECT count(*) FROM effectd.attempts`).Scan(&attempts)
	if attempts != n {
		t.Errorf("attempt rows = %d, want %d", attempts, n)
	}
	t.Logf("calls by instance: %s", fmt.Sprint(by))
}
