package bench

import (
	"context"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/localpg"
	"github.com/effectd/effectd/internal/query/harnessdb"
)

// The citus scenario's producer: a table of its own, producer.orders,
// distributed by bucket on Citus (a plain table on one PostgreSQL), and one
// order per transaction, with or without an enqueue of the order's bucket.
const (
	citusBuckets       = 32
	benchOrdersSQL     = `CREATE SCHEMA producer; CREATE TABLE producer.orders (bucket int NOT NULL, id bigserial NOT NULL, ref text NOT NULL, PRIMARY KEY (bucket, ref))`
	benchDistributeSQL = `SELECT create_distributed_table('producer.orders', 'bucket')`
	benchOrderSQL      = `INSERT INTO producer.orders (bucket, ref) VALUES ($1, $2)`
	benchEnqueueSQL    = `SELECT effectd.enqueue(event_id => $1, channel => 'bench', payload => $2::jsonb, bucket => $3)`
)

func benchBucket(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % citusBuckets)
}

// order commits one producer transaction: the order, and its enqueue if asked.
func order(ctx context.Context, pool *pgxpool.Pool, id string, enqueue bool) error {
	b := benchBucket(id)
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, benchOrderSQL, b, id); err != nil {
			return err
		}
		if !enqueue {
			return nil
		}
		_, err := tx.Exec(ctx, benchEnqueueSQL, id, benchPayload(id), b)
		return err
	})
}

// citus: effectd on a Citus cluster on loopback (a coordinator and two
// workers, each its own PostgreSQL on this machine): what a producer's
// transaction costs through the coordinator against one PostgreSQL, and how
// fast one and three instances drain a backlog.
func (e *env) citus(ctx context.Context) error {
	c, err := localpg.StartCitus(ctx, filepath.Join(e.dir, "citus"), 2, localpg.Options{Fast: !e.opt.Durable,
		Settings: []string{"max_wal_size=4GB", "checkpoint_timeout=30min"}})
	if err != nil {
		return err
	}
	defer c.Stop()
	if err := e.citusProducer(ctx, c); err != nil {
		return err
	}
	for _, n := range []int{1, 3} {
		if err := e.citusDrain(ctx, c, n); err != nil {
			return err
		}
	}
	return nil
}

// citusDatabase makes a database on the cluster with the producer's table
// distributed, migrated in the distributed mode with the bench channel, and
// returns its URL, a pool and the YAML's path.
func (e *env) citusDatabase(ctx context.Context, c *localpg.Citus) (string, *pgxpool.Pool, string, error) {
	e.seq++
	name := fmt.Sprintf("bench_citus_%d", e.seq)
	if err := c.CreateDatabase(ctx, name); err != nil {
		return "", nil, "", err
	}
	url := c.URL(name)
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return "", nil, "", err
	}
	pcfg.MaxConns = int32(max(e.opt.Producers, 4) + 4)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return "", nil, "", err
	}
	if _, err := pool.Exec(ctx, benchOrdersSQL+"; "+benchDistributeSQL); err != nil {
		pool.Close()
		return "", nil, "", err
	}
	e.dbYAML = fmt.Sprintf("database:\n  citus: { colocate_with: producer.orders, bucket_column: bucket, buckets: %d }\n", citusBuckets)
	defer func() { e.dbYAML = "" }()
	cfg, err := e.config(ctx, url, e.opt.Concurrency, "")
	if err != nil {
		pool.Close()
		return "", nil, "", err
	}
	return url, pool, cfg, nil
}

// citusProducer: one order per transaction, alone or with its enqueue, from
// e.opt.Producers clients, on one PostgreSQL and through the coordinator, in
// alternating rounds after a warm-up.
func (e *env) citusProducer(ctx context.Context, c *localpg.Citus) error {
	_, plain, err := e.database(ctx)
	if err != nil {
		return err
	}
	defer plain.Close()
	if _, err := plain.Exec(ctx, benchOrdersSQL); err != nil {
		return err
	}
	if err := harnessdb.AddChannels(ctx, plain, map[string]string{"bench": "webhook"}); err != nil {
		return err
	}
	_, dist, _, err := e.citusDatabase(ctx, c)
	if err != nil {
		return err
	}
	defer dist.Close()
	type mode struct {
		name    string
		pool    *pgxpool.Pool
		enqueue bool
	}
	modes := []mode{{"PostgreSQL: order", plain, false}, {"PostgreSQL: order + enqueue", plain, true},
		{"Citus: order", dist, false}, {"Citus: order + enqueue", dist, true}}
	run := func(m mode, prefix string, d time.Duration) (int64, time.Duration, error) {
		return e.hammer(ctx, prefix, d, func(ctx context.Context, id string) error { return order(ctx, m.pool, id, m.enqueue) })
	}
	for i, m := range modes {
		if _, _, err := run(m, fmt.Sprintf("c%d-warm-%d-", e.seq, i), time.Second); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
	}
	const rounds = 8
	round := e.opt.Duration / rounds
	rate := map[string][]float64{}
	for r := range rounds {
		m := modes[r%len(modes)]
		n, d, err := run(m, fmt.Sprintf("c%d-%d-", e.seq, r), round)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		rate[m.name] = append(rate[m.name], float64(n)/d.Seconds())
	}
	fmt.Fprintf(e.out, "citus, producer cost: %d clients, one order per transaction (with its enqueue, bucket => the order's), no dispatcher running, %d alternating rounds of %.1fs; Citus: a coordinator and 2 workers on this machine, %d buckets\n",
		e.opt.Producers, rounds, round.Seconds(), citusBuckets)
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	for _, m := range modes {
		var rs []string
		for _, x := range rate[m.name] {
			rs = append(rs, fmt.Sprintf("%.0f", x))
		}
		fmt.Fprintf(e.out, "  %-28s %6.0f tx/s (rounds: %s)\n", m.name, mean(rate[m.name]), strings.Join(rs, ", "))
	}
	fmt.Fprintf(e.out, "  order + enqueue through the coordinator: %.2fx the time of one PostgreSQL\n",
		mean(rate[modes[1].name])/mean(rate[modes[3].name]))
	return nil
}

// citusDrain enqueues e.opt.Events orders through the coordinator, then
// starts n instances at once and times them until every effect is applied.
func (e *env) citusDrain(ctx context.Context, c *localpg.Citus, n int) error {
	url, pool, cfg, err := e.citusDatabase(ctx, c)
	if err != nil {
		return err
	}
	defer pool.Close()
	prefix := fmt.Sprintf("citus%d-", e.seq)
	committed := make(map[string]bool, e.opt.Events)
	for i := range e.opt.Events {
		committed[fmt.Sprintf("%s%07d", prefix, i)] = true
	}
	start := time.Now()
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range e.opt.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for failed.Load() == nil {
				i := int(next.Add(1) - 1)
				if i >= e.opt.Events {
					return
				}
				if err := order(ctx, pool, fmt.Sprintf("%s%07d", prefix, i), true); err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return *err
	}
	took := time.Since(start)
	before, _ := e.sandbox.Ledger.Count("webhook")
	ins := make([]*instance, n)
	errs := make([]error, n)
	launched := time.Now()
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); ins[i], errs[i] = e.serve(ctx, url, cfg, false) }()
	}
	wg.Wait()
	done, err := e.waitApplied(before+len(committed), 10*time.Minute)
	for i, in := range ins {
		if in != nil {
			if serr := in.stop(); serr != nil && errs[i] == nil {
				errs[i] = fmt.Errorf("effectd serve: %w", serr)
			}
		}
	}
	for _, ierr := range errs {
		if ierr != nil {
			return ierr
		}
	}
	if err != nil {
		return err
	}
	lost, dup := e.integrity(prefix, committed)
	elapsed := done.Sub(launched)
	rate := float64(len(committed)) / elapsed.Seconds()
	fmt.Fprintf(e.out, "citus, drain: %d orders with their enqueue by %d clients through the coordinator in %.2fs (%.0f tx/s)\n",
		len(committed), e.opt.Producers, took.Seconds(), float64(len(committed))/took.Seconds())
	fmt.Fprintf(e.out, "  %d instance(s) started at once, webhook channel, concurrency %d: drained in %.2fs = %.0f intents/s (%.0f per instance)\n",
		n, e.opt.Concurrency, elapsed.Seconds(), rate, rate/float64(n))
	fmt.Fprintf(e.out, "  lost %d, duplicates %d\n", lost, dup)
	if lost+dup > 0 {
		return fmt.Errorf("lost %d, duplicates %d", lost, dup)
	}
	return nil
}
