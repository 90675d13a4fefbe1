package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
)

// The producers' verbs besides enqueue (migration 021, docs/producers.md) on
// the checker's random schedule (Config.Actors):
//   - enqueue many: a seeded share of the producers' transactions enqueue
//     through effectd.enqueue_many (dispatcher.EnqueueMany on one node, the
//     SQL function with the bucket on Citus), some with the deliveries
//     planned within batchGap after the first in the same transaction, as a
//     producer takes a few messages from its broker at once (on Citus, those
//     of the first's bucket: a producer's transaction is on its bucket's
//     shard, as enqueue's is). Each delivery
//     keeps its own answer (new or duplicate) and its own bookkeeping;
//   - cancel: a seeded share of events are cancelled by their producer
//     (effectd.cancel, dispatcher.Cancel) at a random moment within
//     cancelWithin after their first delivery that committed, half of them
//     enqueued to be sent a little later (not_before), as a scheduled
//     message is. Each cancel is an Op of the
//     history (actor producer, action cancel, its answer), and one answered
//     CANCELLED marks the event's Outcome; judgeCancels judges them.

const (
	manyShare    = 0.3                    // transactions that enqueue through enqueue_many
	batchGap     = 250 * time.Millisecond // deliveries this soon after a batch's first may join it
	batchMost    = 4                      // deliveries in a batch at most
	cancelShare  = 0.12                   // events their producer cancels
	cancelWithin = 2500 * time.Millisecond
	cancelReason = "chaos check: the producer cancels"
	actCancel    = "cancel"
)

// cancelPlan is one producer's cancel: of which event, how long after its
// first delivery that committed, at which isolation level.
type cancelPlan struct {
	after            time.Duration
	eventID, channel string
	iso              pgx.TxIsoLevel
}

// planVerbs draws the cancels (scheduling half of the cancelled events'
// deliveries a little later) and groups the deliveries into transactions
// (buckets: the producer's on Citus, 0 on one PostgreSQL).
func planVerbs(rng *rand.Rand, ds []delivery, buckets int) ([][]delivery, []cancelPlan) {
	cancels := planCancels(rng, ds)
	return planBatches(rng, ds, buckets), cancels
}

// planCancels picks the events their producer cancels, each at a random
// moment within cancelWithin of its first commit, and sets not_before on
// every delivery of half of them. Events that only ever roll back are left
// alone.
func planCancels(rng *rand.Rand, ds []delivery) []cancelPlan {
	byEvent := map[string][]int{}
	var order []string
	for i, d := range ds {
		if byEvent[d.eventID] == nil {
			order = append(order, d.eventID)
		}
		byEvent[d.eventID] = append(byEvent[d.eventID], i)
	}
	var out []cancelPlan
	for _, ev := range order {
		idx := byEvent[ev]
		first := ds[idx[0]]
		if rng.Float64() >= cancelShare || allRollBack(ds, idx) {
			continue
		}
		if rng.Float64() < 0.5 {
			later := time.Duration(300+rng.IntN(1700)) * time.Millisecond
			for _, i := range idx {
				ds[i].notBefore = later
			}
		}
		out = append(out, cancelPlan{after: time.Duration(rng.Float64() * float64(cancelWithin)),
			eventID: ev, channel: first.channel, iso: isolationLevels[rng.IntN(len(isolationLevels))]})
	}
	return out
}

func allRollBack(ds []delivery, idx []int) bool {
	for _, i := range idx {
		if !ds[i].rollback {
			return false
		}
	}
	return true
}

// planBatches groups ds (sorted by time) into transactions: most alone; a
// manyShare of them enqueue through enqueue_many, with up to batchMost-1
// later deliveries within batchGap of the first, of other events and the
// same fate (committed or rolled back), at the first's isolation level; on
// Citus (buckets > 0) of the first's bucket.
func planBatches(rng *rand.Rand, ds []delivery, buckets int) [][]delivery {
	taken := make([]bool, len(ds))
	var groups [][]delivery
	for i := range ds {
		if taken[i] {
			continue
		}
		taken[i] = true
		g := []delivery{ds[i]}
		if rng.Float64() < manyShare {
			g[0].many = true
			size := 1 + rng.IntN(batchMost)
			for j := i + 1; j < len(ds) && len(g) < size && ds[j].at-ds[i].at <= batchGap; j++ {
				if taken[j] || ds[j].rollback != ds[i].rollback || hasEvent(g, ds[j].eventID) ||
					(buckets > 0 && bucketOf(ds[j].eventID, buckets) != bucketOf(ds[i].eventID, buckets)) {
					continue
				}
				taken[j] = true
				d := ds[j]
				d.many, d.iso = true, ds[i].iso
				g = append(g, d)
			}
		}
		groups = append(groups, g)
	}
	return groups
}

func hasEvent(g []delivery, ev string) bool {
	for _, d := range g {
		if d.eventID == ev {
			return true
		}
	}
	return false
}

// intent is what d enqueues, as dispatcher.Enqueue takes it.
func (d delivery) intent() dispatcher.Intent {
	in := dispatcher.Intent{EventID: d.eventID, Channel: d.channel, Payload: d.payload}
	if d.notBefore > 0 {
		in.NotBefore = time.Now().Add(d.notBefore)
	}
	return in
}

// notBeforeAt is d's not_before as the SQL functions take it (nil: none).
func (d delivery) notBeforeAt() *time.Time {
	if d.notBefore <= 0 {
		return nil
	}
	t := time.Now().Add(d.notBefore)
	return &t
}

// citusEnqueueManySQL is effectd.enqueue_many of a batch on one bucket,
// given as parallel arrays (event ids, channels, payloads, not_before),
// answering each row's outcome in the batch's order.
const citusEnqueueManySQL = `SELECT a.outcome FROM effectd.enqueue_many(
	intents => ARRAY(SELECT (t.e, t.c, t.p::jsonb, NULL::timestamptz, t.nb, NULL::text)::effectd.new_intent
		FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) WITH ORDINALITY AS t(e, c, p, nb, n)
		ORDER BY t.n),
	bucket => $5) AS a ORDER BY a.ord`

// enqueueMany enqueues the batch g in tx with one enqueue_many: on one node
// through dispatcher.EnqueueMany, on Citus with the SQL function and the
// batch's bucket (planBatches keeps a batch on one). It returns, for each
// delivery, whether its answer was new.
func enqueueMany(ctx context.Context, tx pgx.Tx, g []delivery, buckets int) ([]bool, error) {
	inserted := make([]bool, len(g))
	if buckets == 0 {
		intents := make([]dispatcher.Intent, len(g))
		for i, d := range g {
			intents[i] = d.intent()
		}
		res, err := dispatcher.EnqueueMany(ctx, tx, intents, dispatcher.BatchOptions{})
		if err != nil {
			return nil, err
		}
		for i, r := range res {
			inserted[i] = r.Outcome == dispatcher.BatchNew
		}
		return inserted, nil
	}
	var evs, chans, payloads []string
	var nbs []*time.Time
	for _, d := range g {
		evs, chans, payloads, nbs = append(evs, d.eventID), append(chans, d.channel), append(payloads, d.payload), append(nbs, d.notBeforeAt())
	}
	rows, err := tx.Query(ctx, citusEnqueueManySQL, evs, chans, payloads, nbs, bucketOf(g[0].eventID, buckets))
	if err != nil {
		return nil, err
	}
	outcomes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	if len(outcomes) != len(g) {
		return nil, fmt.Errorf("chaos: enqueue_many answered %d rows for %d intents", len(outcomes), len(g))
	}
	for i, o := range outcomes {
		inserted[i] = o == dispatcher.BatchNew
	}
	return inserted, nil
}

// canceller runs the producers' planned cancels: each once, its delay after
// its event's first delivery that committed (Log.afterCommit).
type canceller struct {
	ctx     context.Context
	pool    *pgxpool.Pool
	buckets int
	log     *Log
	hist    *History

	mu      sync.Mutex
	plans   map[string]cancelPlan // by event, until started
	running sync.WaitGroup
}

// newCanceller plans plans's cancels and hooks them to log's commits.
func newCanceller(ctx context.Context, pool *pgxpool.Pool, plans []cancelPlan, buckets int, log *Log, hist *History) *canceller {
	c := &canceller{ctx: ctx, pool: pool, buckets: buckets, log: log, hist: hist, plans: map[string]cancelPlan{}}
	for _, p := range plans {
		c.plans[p.eventID] = p
	}
	log.afterCommit = c.committed
	return c
}

// committed starts ev's cancel, if it has one not yet started.
func (c *canceller) committed(ev string) {
	c.mu.Lock()
	p, ok := c.plans[ev]
	delete(c.plans, ev)
	c.mu.Unlock()
	if !ok {
		return
	}
	c.running.Add(1)
	go func() {
		defer c.running.Done()
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(p.after):
		}
		producerCancel(c.ctx, c.pool, p, c.buckets, c.log, c.hist)
	}()
}

// wait waits for every cancel started.
func (c *canceller) wait() { c.running.Wait() }

// producerCancel cancels c's event in a transaction of its own, retrying as
// deliver does (a cancel is idempotent: after a COMMIT whose outcome was
// lost, the next try answers what the first did), and records the answer:
// "ok, <status>" (none: no such intent yet), refused (a refusal no retry
// cures) or unknown (no answer in 30 tries).
func producerCancel(ctx context.Context, pool *pgxpool.Pool, c cancelPlan, buckets int, log *Log, hist *History) {
	op := Op{Actor: "producer", Action: actCancel, Channel: c.channel, Event: c.eventID, Result: "unknown"}
	for try := 0; try < 30 && ctx.Err() == nil; try++ {
		status, err := cancelOnce(ctx, pool, c, buckets)
		if state, bad := refusal(err); bad {
			op.Result, op.Detail = "refused", state
			break
		}
		if err == nil {
			op.Result, op.Detail = "ok, "+status, status
			break
		}
		op.Detail = err.Error()
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(100+50*try) * time.Millisecond):
		}
	}
	op.At = time.Now()
	if op.Result == "ok, CANCELLED" {
		log.update(c.eventID, c.channel, func(o *Outcome) { o.Cancelled = true })
	}
	hist.add(op)
}

// citusCancelSQL is effectd.cancel on the event's bucket.
const citusCancelSQL = `SELECT effectd.cancel(event_id => $1, channel => $2, reason => $3, bucket => $4)`

// cancelOnce is the producer's cancel transaction: effectd.cancel
// (dispatcher.Cancel on one node, the SQL function with the bucket on
// Citus), then COMMIT. It returns the answered status, "none" for no such
// intent.
func cancelOnce(ctx context.Context, pool *pgxpool.Pool, c cancelPlan, buckets int) (string, error) {
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tx, err := pool.BeginTx(tctx, pgx.TxOptions{IsoLevel: c.iso})
	if err != nil {
		return "", err
	}
	defer tx.Rollback(context.WithoutCancel(tctx))
	status := "none"
	if buckets > 0 {
		var s *string
		err = tx.QueryRow(tctx, citusCancelSQL, c.eventID, c.channel, cancelReason, bucketOf(c.eventID, buckets)).Scan(&s)
		if s != nil {
			status = *s
		}
	} else {
		status, err = dispatcher.Cancel(tctx, tx, dispatcher.IntentKey{EventID: c.eventID, Channel: c.channel}, cancelReason)
		if errors.Is(err, dispatcher.ErrNotFound) {
			status, err = "none", nil
		}
	}
	if err != nil {
		return "", err
	}
	if err := tx.Commit(tctx); err != nil {
		if errors.Is(err, pgx.ErrTxCommitRollback) {
			return "", err
		}
		return "", fmt.Errorf("%w: %v", errUnknownCommit, err)
	}
	return status, nil
}
