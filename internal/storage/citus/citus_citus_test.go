//go:build citus

package citus_test

import (
	"context"
	"testing"

	"github.com/effectd/effectd/internal/citustest"
	"github.com/effectd/effectd/internal/storage/citus"
	"github.com/effectd/effectd/internal/storage/storagetest"
	"github.com/effectd/effectd/migrations"
)

func TestMain(m *testing.M) { citustest.Main(m) }

// TestCitusContract runs the storage contract suite on a Citus cluster, the
// intents distributed by bucket and every bucket served by this store.
func TestCitusContract(t *testing.T) {
	const buckets = 4
	pool := citustest.New(t)
	ctx := context.Background()
	citustest.ProducerOrders(t, pool)
	if err := migrations.New(pool).Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.New(pool).Distribute(ctx, migrations.Citus{Schema: "producer", Table: "orders", Column: "bucket", Buckets: buckets,
		PartitionDays: migrations.DefaultPartitionDays}); err != nil {
		t.Fatal(err)
	}
	all := []int{0, 1, 2, 3}
	storagetest.Run(t, storagetest.Harness{Store: citus.New(pool, buckets, func() []int { return all }), Pool: pool,
		Enqueue: func(t *testing.T, channel, event string, i int) {
			t.Helper()
			if _, err := pool.Exec(context.Background(), `SELECT effectd.enqueue(event_id => $1, channel => $2, payload => '{"n": 1}', bucket => $3)`,
				event, channel, i%buckets); err != nil {
				t.Fatalf("enqueue %s: %v", event, err)
			}
		}})
}
