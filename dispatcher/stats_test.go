package dispatcher_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
)

// TestStatsReadsCountsAndGaugesAtOnce: Stats takes two connections at once,
// one for the counts and one for the gauges, so that in the distributed mode
// their rounds over the shards overlap. The pool's first acquire waits (up to
// a few seconds) for a second one to arrive: read one after the other, the
// second never comes while the first is held.
func TestStatsReadsCountsAndGaugesAtOnce(t *testing.T) {
	t.Parallel()
	base := pgtest.New(t)
	ctx := context.Background()
	cfg := base.Config()
	var mu sync.Mutex
	held, most := 0, 0
	second := make(chan struct{})
	var once sync.Once
	cfg.PrepareConn = func(ctx context.Context, _ *pgx.Conn) (bool, error) {
		mu.Lock()
		held++
		most = max(most, held)
		if held == 2 {
			once.Do(func() { close(second) })
		}
		mu.Unlock()
		select {
		case <-second:
		case <-time.After(3 * time.Second):
		}
		return true, nil
	}
	cfg.AfterRelease = func(*pgx.Conn) bool {
		mu.Lock()
		held--
		mu.Unlock()
		return true
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := dispatcher.Stats(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if most < 2 {
		t.Errorf("Stats held at most %d connection at once, want 2 (counts and gauges read at once)", most)
	}
}
