package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"riverbench/load"
)

const schema = `
DROP TABLE IF EXISTS floor_attempts, floor_intents;
CREATE TABLE floor_intents (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id         text NOT NULL,
    channel          text NOT NULL,
    payload          jsonb NOT NULL,
    status           text NOT NULL DEFAULT 'PENDING',
    attempts         int NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    UNIQUE (event_id, channel)
);
CREATE INDEX floor_intents_due ON floor_intents (id) WHERE status = 'PENDING';
CREATE TABLE floor_attempts (
    intent_id   bigint NOT NULL,
    attempt     int NOT NULL,
    outcome     text NOT NULL,
    finished_at timestamptz NOT NULL
);`

// claimSQL takes up to $1 due rows under a 30 s lease.
const claimSQL = `
UPDATE floor_intents f SET status = 'SENDING', attempts = f.attempts + 1, lease_expires_at = now() + interval '30 seconds'
WHERE f.id IN (SELECT id FROM floor_intents WHERE status = 'PENDING' ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING f.id, f.attempts, f.event_id, f.channel, f.payload::text`

// completeSQL applies a batch of outcomes as fenced compare-and-sets and
// records each applied call.
const completeSQL = `
WITH done AS (
    UPDATE floor_intents f SET status = t.status, lease_expires_at = NULL
    FROM unnest($1::bigint[], $2::int[], $3::text[]) AS t(id, attempts, status)
    WHERE f.id = t.id AND f.status = 'SENDING' AND f.attempts = t.attempts
    RETURNING f.id, f.attempts, t.status
)
INSERT INTO floor_attempts (intent_id, attempt, outcome, finished_at)
SELECT id, attempts, status, now() FROM done`

type job struct {
	id       int64
	attempts int32
	key      string
	body     string
}

type outcome struct {
	id       int64
	attempts int32
	status   string
}

func main() {
	load.ServeProviderIfAsked()
	cfg := load.Flags()
	concurrency := flag.Int("concurrency", 256, "calls in flight")
	batch := flag.Int("batch", 128, "most rows one claim takes")
	flag.Parse()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, schema); err != nil {
		log.Fatal(err)
	}
	prov, err := load.StartProvider(cfg.ProviderDelay)
	if err != nil {
		log.Fatal(err)
	}
	defer prov.Close()
	enqueue := func(ctx context.Context, eventID, channel, body string) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO floor_intents (event_id, channel, payload) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
				eventID, channel, body)
			return err
		})
	}
	d := &dispatcher{pool: pool, prov: prov, concurrency: *concurrency, batch: *batch}
	res, err := load.Run(ctx, cfg, prov, load.Dispatcher{Enqueue: enqueue, Start: d.start, Stop: d.stop, PID: os.Getpid})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Line("floor"))
}

// dispatcher claims, calls and completes: one claim loop, concurrency
// callers, one completion writer.
type dispatcher struct {
	pool        *pgxpool.Pool
	prov        *load.Provider
	concurrency int
	batch       int
	cancel      context.CancelFunc
	wg          sync.WaitGroup
}

func (d *dispatcher) start() error {
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	jobs := make(chan job, d.batch)
	outs := make(chan outcome, d.concurrency)
	slots := make(chan struct{}, d.concurrency)
	for range d.concurrency {
		d.wg.Go(func() { d.call(ctx, jobs, outs, slots) })
	}
	d.wg.Go(func() { d.complete(ctx, outs) })
	d.wg.Go(func() { d.claim(ctx, jobs, slots) })
	return nil
}

func (d *dispatcher) stop() { d.cancel(); d.wg.Wait() }

// claim takes as many due rows as there are free slots; when none is due it
// polls again after a millisecond.
func (d *dispatcher) claim(ctx context.Context, jobs chan<- job, slots chan struct{}) {
	for ctx.Err() == nil {
		free := cap(slots) - len(slots)
		n := min(free, d.batch)
		if n == 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		rows, _ := d.pool.Query(ctx, claimSQL, n)
		var got []job
		for rows.Next() {
			var j job
			var event, channel string
			if err := rows.Scan(&j.id, &j.attempts, &event, &channel, &j.body); err != nil {
				break
			}
			j.key = channel + ":" + event
			got = append(got, j)
		}
		rows.Close()
		for _, j := range got {
			slots <- struct{}{}
			jobs <- j
		}
		if len(got) < n {
			time.Sleep(time.Millisecond)
		}
	}
}

// call makes each job's call, as River's worker does, and hands its outcome
// to the writer.
func (d *dispatcher) call(ctx context.Context, jobs <-chan job, outs chan<- outcome, slots chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-jobs:
			status := "SENT"
			if err := d.prov.Post(ctx, d.prov.URL, j.key, j.body); err != nil {
				status = "FAILED"
			}
			outs <- outcome{id: j.id, attempts: j.attempts, status: status}
			<-slots
		}
	}
}

// complete writes the outcomes waiting, in one statement, as soon as it has
// any: while one batch is written the next gathers.
func (d *dispatcher) complete(ctx context.Context, outs <-chan outcome) {
	for {
		var first outcome
		select {
		case <-ctx.Done():
			return
		case first = <-outs:
		}
		ids, atts, sts := []int64{first.id}, []int32{first.attempts}, []string{first.status}
	more:
		for len(ids) < 1024 {
			select {
			case o := <-outs:
				ids, atts, sts = append(ids, o.id), append(atts, o.attempts), append(sts, o.status)
			default:
				break more
			}
		}
		if _, err := d.pool.Exec(ctx, completeSQL, ids, atts, sts); err != nil && ctx.Err() == nil {
			log.Printf("complete: %v", err)
		}
	}
}
