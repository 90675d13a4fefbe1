package citustest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/localpg"
)

// Workers is how many workers the cluster has.
const Workers = 2

var (
	once    sync.Once
	onceErr error
	cluster *localpg.Citus
	tmpDir  string
	counter atomic.Int64
	prefix  = fmt.Sprintf("effectd_citus_%d", os.Getpid())
)

// Main runs the tests of a package and stops the cluster, if one was started.
// Call it from TestMain: func TestMain(m *testing.M) { citustest.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop stops the cluster, if one was started, and removes its directory: for
// a package whose TestMain is another's (pgtest.AtExit(citustest.Stop)).
func Stop() {
	if cluster != nil {
		cluster.Stop()
		os.RemoveAll(tmpDir)
		cluster = nil
	}
}

// Require skips the test when Citus is not installed, or fails it when the
// environment variable CI is set (as the console's browser test does).
func Require(t testing.TB) {
	t.Helper()
	_, err := localpg.CitusLibrary()
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("citustest: CI is set and Citus is missing: %v", err)
	}
	t.Skipf("citustest: skipped: %v (CI unset)", err)
}

// Cluster returns the test binary's Citus cluster, starting it on first use.
func Cluster(t testing.TB) *localpg.Citus {
	t.Helper()
	Require(t)
	once.Do(func() { onceErr = start() })
	if onceErr != nil {
		t.Fatalf("citustest: %v", onceErr)
	}
	return cluster
}

func start() error {
	// three initdb and three starts: minutes on a loaded 2-core machine
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var err error
	if tmpDir, err = os.MkdirTemp("", "effectd-citus-"); err != nil {
		return err
	}
	// the postgres user (when running as root) must reach the nodes' directories
	if err := os.Chmod(tmpDir, 0o755); err != nil {
		return err
	}
	cluster, err = localpg.StartCitus(ctx, tmpDir, Workers, localpg.Options{Fast: true,
		Settings: []string{"citus.shard_count=8"}})
	return err
}

// URL returns the coordinator's connection string for a fresh database of the
// cluster (on every node, with the citus extension and the workers
// registered), dropped on every node when the test ends. It holds no schema
// of effectd's: the test creates the producer's table, then migrates.
func URL(t testing.TB) string {
	t.Helper()
	began := time.Now()
	c := Cluster(t)
	name := fmt.Sprintf("%s_%d", prefix, counter.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.DropDatabase(ctx, name); err != nil {
			t.Logf("citustest: dropping %s: %v", name, err)
		}
	})
	if err := c.CreateDatabase(ctx, name); err != nil {
		t.Fatalf("citustest: %v", err)
	}
	t.Logf("citustest: database %s ready in %s", name, time.Since(began).Round(time.Millisecond))
	return c.URL(name)
}

// New returns a pool on a fresh database (URL), closed when the test ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), URL(t))
	if err != nil {
		t.Fatalf("citustest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// ProducerOrders makes a producer's table on pool's database,
// producer.orders (bucket int, id bigint), distributed by bucket: the table
// effectd's tables are co-located with in the tests.
func ProducerOrders(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	for _, q := range []string{
		`CREATE SCHEMA producer`,
		`CREATE TABLE producer.orders (bucket int NOT NULL, id bigint NOT NULL, PRIMARY KEY (bucket, id))`,
		`SELECT create_distributed_table('producer.orders', 'bucket')`,
	} {
		if _, err := pool.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
