//go:build citus

package dispatcher_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/citustest"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/migrations"
)

// pgtest.Main stops the Citus cluster the tests of this binary started, if any.
func init() { pgtest.AtExit(citustest.Stop) }

// citusPool returns a pool on a fresh Citus database with producer.orders
// distributed by bucket, migrated and distributed with buckets buckets.
func citusPool(t *testing.T, buckets int) *pgxpool.Pool {
	t.Helper()
	return citusPoolDays(t, buckets, migrations.DefaultPartitionDays)
}

// citusPoolDays is citusPool with partitions of days days made after migrate.
func citusPoolDays(t *testing.T, buckets, days int) *pgxpool.Pool {
	t.Helper()
	pool := citustest.New(t)
	ctx := context.Background()
	citustest.ProducerOrders(t, pool)
	if err := migrations.New(pool).Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.New(pool).Distribute(ctx, migrations.Citus{Schema: "producer", Table: "orders", Column: "bucket", Buckets: buckets, PartitionDays: days}); err != nil {
		t.Fatal(err)
	}
	return pool
}

// TestCitusDispatch: two dispatchers in the distributed mode divide the
// buckets between them and send every intent enqueued with a producer's
// order once; a retry is completed on its bucket's shard, and a maybe-sent
// call without a key is settled by the reconciler of the bucket's owner and
// sent again. Every attempt row is on its intent's bucket. When one
// dispatcher stops, the other serves every bucket and sends what comes next.
func TestCitusDispatch(t *testing.T) {
	const buckets = 8
	pool := citusPool(t, buckets)
	ctx := context.Background()
	p := &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) {
		switch {
		case strings.HasSuffix(key, ":retry") && n == 1:
			return "", providerErr{retryable: true}
		case strings.HasSuffix(key, ":maybe") && n == 1:
			return "", providerErr{retryable: true, maybeSent: true}
		}
		return "ref-" + key, nil
	}}
	pol := fastPolicy("webhook") // a maybe-sent call's lease ends the grace after it (a tenth of the lease): the reconciler takes it then
	chans := []dispatcher.Channel{{Name: "c", Kind: "webhook", Provider: p, Policy: pol}}
	cfg := dispatcher.Config{Channels: chans, Buckets: buckets, BucketLease: 2 * time.Second,
		ReconcileInterval: 50 * time.Millisecond, RefreshInterval: 100 * time.Millisecond}
	a := run(t, pool, cfg)
	b, err := dispatcher.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(context.Background()) }) // before the pool closes; Stop is idempotent

	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			event := fmt.Sprintf("order-%d", i)
			switch i % 10 {
			case 3:
				event += ":retry"
			case 7:
				event += ":maybe"
			}
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO producer.orders (bucket, id) VALUES ($1, $2)`, i%buckets, i); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `SELECT effectd.enqueue(event_id => $1, channel => 'c', payload => '{}', bucket => $2)`, event, i%buckets); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	allSent := func(n int) {
		t.Helper()
		eventually(t, 60*time.Second, fmt.Sprintf("%d intents SENT", n), func() bool {
			var sent int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE status = 'SENT'`).Scan(&sent); err != nil {
				t.Fatal(err)
			}
			return sent == n
		})
	}
	checkCalls := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			key, want := fmt.Sprintf("c:order-%d", i), 1
			switch i % 10 {
			case 3:
				key, want = key+":retry", 2
			case 7:
				key, want = key+":maybe", 2
			}
			if got := p.Calls(key); got != want {
				t.Errorf("%s called %d times; want %d", key, got, want)
			}
		}
	}

	eventually(t, 20*time.Second, "both dispatchers serve buckets", func() bool {
		oa, ob := dispatcher.OwnedBuckets(a), dispatcher.OwnedBuckets(b)
		return len(oa) > 0 && len(ob) > 0 && len(oa)+len(ob) == buckets
	})
	if oa, ob := dispatcher.OwnedBuckets(a), dispatcher.OwnedBuckets(b); slices.ContainsFunc(oa, func(x int) bool { return slices.Contains(ob, x) }) {
		t.Fatalf("a bucket served twice: %v and %v", oa, ob)
	}
	produce(0, 60)
	allSent(60)
	checkCalls(0, 60)
	var misplaced int
	if err := pool.QueryRow(ctx, `
SELECT count(*) FROM effectd.attempts a
WHERE NOT EXISTS (SELECT 1 FROM effectd.intents i WHERE i.bucket = a.bucket AND i.id = a.intent_id)`).Scan(&misplaced); err != nil || misplaced != 0 {
		t.Fatalf("attempt rows not on their intent's bucket: %d, %v", misplaced, err)
	}
	var settled int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.attempts WHERE kind = 'lookup'`).Scan(&settled); err != nil || settled != 6 {
		t.Fatalf("settlements by the reconciler: %d, %v; want 6 (the maybe-sent calls)", settled, err)
	}

	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := b.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a serves every bucket once b stopped", func() bool {
		return len(dispatcher.OwnedBuckets(a)) == buckets
	})
	produce(60, 100)
	allSent(100)
	checkCalls(60, 100)
}
