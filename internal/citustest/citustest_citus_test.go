//go:build citus

package citustest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/citustest"
)

func TestMain(m *testing.M) { citustest.Main(m) }

// colocated makes two co-located tables distributed by bucket, orders and
// lines, and returns two buckets whose shards are on different workers.
func colocated(t *testing.T, pool *pgxpool.Pool) (a, b int) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		`CREATE TABLE orders (bucket int NOT NULL, id bigint NOT NULL, PRIMARY KEY (bucket, id))`,
		`CREATE TABLE lines (bucket int NOT NULL, order_id bigint NOT NULL, n int NOT NULL, PRIMARY KEY (bucket, order_id, n))`,
		`SELECT create_distributed_table('orders', 'bucket')`,
		`SELECT create_distributed_table('lines', 'bucket', colocate_with => 'orders')`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// the worker's port holding each bucket's shard of orders
	port := map[int]int{}
	for bucket := range 32 {
		var p int
		err := pool.QueryRow(ctx, `SELECT n.nodeport FROM pg_dist_placement pl JOIN pg_dist_node n USING (groupid)
			WHERE pl.shardid = get_shard_id_for_distribution_column('orders', $1::int)`, bucket).Scan(&p)
		if err != nil {
			t.Fatal(err)
		}
		port[bucket] = p
	}
	for x := range 32 {
		for y := range 32 {
			if port[x] != port[y] {
				return x, y
			}
		}
	}
	t.Fatalf("every bucket's shard is on one worker: %v", port)
	return 0, 0
}

func count(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCitusCluster: a fresh database has both workers registered, and a
// transaction writing co-located rows on both workers commits or rolls back
// as a whole.
func TestCitusCluster(t *testing.T) {
	pool := citustest.New(t)
	ctx := context.Background()
	var workers int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM citus_get_active_worker_nodes()`).Scan(&workers); err != nil {
		t.Fatal(err)
	}
	if workers != citustest.Workers {
		t.Fatalf("%d active workers, want %d", workers, citustest.Workers)
	}
	a, b := colocated(t, pool)

	write := func(tx pgx.Tx, id int64) {
		t.Helper()
		for _, bucket := range []int{a, b} {
			if _, err := tx.Exec(ctx, `INSERT INTO orders VALUES ($1, $2)`, bucket, id); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO lines VALUES ($1, $2, 1), ($1, $2, 2)`, bucket, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write(tx, 1)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if o, l := count(t, pool, "orders"), count(t, pool, "lines"); o != 2 || l != 4 {
		t.Fatalf("after commit: %d orders, %d lines; want 2 and 4", o, l)
	}

	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write(tx, 2)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// a transaction that fails after writing on both workers leaves nothing either
	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write(tx, 3)
	if _, err := tx.Exec(ctx, `INSERT INTO orders VALUES ($1, 1)`, a); err == nil {
		t.Fatal("a duplicate key was accepted")
	}
	if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxCommitRollback) {
		t.Fatalf("commit of a failed transaction: %v, want it rolled back", err)
	}
	if o, l := count(t, pool, "orders"), count(t, pool, "lines"); o != 2 || l != 4 {
		t.Fatalf("after rollbacks: %d orders, %d lines; want the 2 and 4 committed", o, l)
	}
}

// TestCitusWorkerRestart: with a worker stopped, statements on its shards
// fail; started again, the cluster answers and the committed rows are there.
func TestCitusWorkerRestart(t *testing.T) {
	c := citustest.Cluster(t)
	pool := citustest.New(t)
	ctx := context.Background()
	a, b := colocated(t, pool)
	if _, err := pool.Exec(ctx, `INSERT INTO orders VALUES ($1, 1), ($2, 1)`, a, b); err != nil {
		t.Fatal(err)
	}
	if err := c.StopWorker(0); err != nil {
		t.Fatal(err)
	}
	started := false
	defer func() {
		if !started {
			c.StartWorker(context.Background(), 0)
		}
	}()
	if _, err := pool.Exec(ctx, `SELECT count(*) FROM orders`); err == nil {
		t.Fatal("a query over every shard succeeded with a worker down")
	}
	if err := c.StartWorker(ctx, 0); err != nil {
		t.Fatal(err)
	}
	started = true
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for {
		if err = pool.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(new(int)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster does not answer 30s after the worker started: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // polling, bounded by the deadline
	}
	if n := count(t, pool, "orders"); n != 2 {
		t.Fatalf("%d orders after the restart, want 2", n)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO orders VALUES ($1, 2), ($2, 2)`, a, b); err != nil {
		t.Fatalf("writing after the restart: %v", err)
	}
}
