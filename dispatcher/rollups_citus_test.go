//go:build citus

package dispatcher_test

import (
	"context"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
)

// TestCitusRollupsFollowCompletions: in the distributed mode, where no
// trigger runs, the statements that complete intents on their bucket's shard
// append the minute rollups' deltas, and the fold loop adds them to the rollups
// on the coordinator: the charts count exactly what TestRollupsFollowCompletions
// counts on one node, intents spread over every bucket.
func TestCitusRollupsFollowCompletions(t *testing.T) {
	const buckets = 8
	pool := citusPool(t, buckets)
	ctx := context.Background()
	chans := []dispatcher.Channel{{Name: "c", Kind: "webhook", Provider: rollupScript(), Policy: fastPolicy("webhook")}}
	run(t, pool, dispatcher.Config{Channels: chans, Buckets: buckets, BucketLease: 2 * time.Second,
		ReconcileInterval: 50 * time.Millisecond, RefreshInterval: 100 * time.Millisecond})
	for i, event := range rollupEvents() {
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
	eventually(t, 60*time.Second, "every intent settled", func() bool {
		var live int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE status NOT IN ('SENT', 'FAILED')`).Scan(&live); err != nil {
			t.Fatal(err)
		}
		return live == 0
	})
	checkRollups(t, pool)
}
