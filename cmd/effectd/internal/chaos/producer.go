package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/query"
)

// delivery is one broker delivery of an event to a producer.
type delivery struct {
	at       time.Duration // when, from the start of production
	eventID  string
	channel  string
	id       string // broker delivery id: the same on a plain redelivery, new on a re-publication
	payload  string
	rollback bool // the producer's transaction fails and rolls back
	// With the checker's actors (Config.Actors), see actors.go:
	iso      pgx.TxIsoLevel // the transaction's isolation level; "" is the server's default (READ COMMITTED)
	moveDays int            // moves the new intent and its dedupe key this many UTC days, in the same transaction
	// With the producers' verbs (verbs.go):
	many      bool          // enqueued through effectd.enqueue_many, alone or with the rest of its batch
	notBefore time.Duration // > 0: enqueued with not_before this long after its transaction (a scheduled intent)
}

// Outcome is what a producer knows about one event after production.
type Outcome struct {
	Channel    string
	Committed  bool // some transaction that enqueued it committed
	Maybe      bool // some commit's outcome is unknown (connection lost mid-commit)
	RolledBack int  // deliveries that rolled back
	Inserted   int  // committed deliveries for which enqueue returned true
	Deliveries int  // deliveries attempted
	// FirstCommit is when the first transaction whose COMMIT succeeded
	// began: a failover that killed the primary later could lose only an
	// acknowledged enqueue that began before it.
	FirstCommit time.Time
	// Ahead: a committed transaction that inserted its intent moved it a
	// day ahead (the moved clock, actors.go).
	Ahead bool
	// Expires: its intent was written on an old day that retention may drop
	// (retention.go); an intent gone with its partition is judged by
	// judgeRetention.
	Expires bool
	// Cancelled: a producer's cancel of it committed and answered CANCELLED
	// (verbs.go); judgeCancels judges what became of it.
	Cancelled bool
}

// Log is the producers' record of every event: what committed, what may have,
// what rolled back. It is safe for concurrent use.
type Log struct {
	mu      sync.Mutex
	events  map[string]*Outcome
	errors  int // failed transactions that were retried
	batches int // transactions that enqueued through enqueue_many
	batched int // deliveries they enqueued
	// afterCommit, if set, is called with the event of each delivery that
	// committed, outside the lock (verbs.go: its producer's cancel follows).
	afterCommit func(eventID string)
	refusal     map[string][]string // SQLSTATE → events: refusals a producer cannot retry its way out of (see refused)
	commits     []commitTiming      // every committed transaction
}

// commitTiming is when a producer's committed transaction began and how long
// it took (its insert, the enqueue and the COMMIT).
type commitTiming struct {
	began time.Time
	took  time.Duration
}

// latency returns the median and 99th percentile of the transactions that
// committed and began before t.
func (l *Log) latency(t time.Time) (p50, p99 time.Duration, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var d []time.Duration
	for _, c := range l.commits {
		if c.began.Before(t) {
			d = append(d, c.took)
		}
	}
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	return d[len(d)/2], d[len(d)*99/100], len(d)
}

func newLog() *Log { return &Log{events: map[string]*Outcome{}, refusal: map[string][]string{}} }

func (l *Log) update(eventID, channel string, f func(o *Outcome)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	o := l.events[eventID]
	if o == nil {
		o = &Outcome{Channel: channel}
		l.events[eventID] = o
	}
	f(o)
}

// Events returns a copy of every event's outcome, by event id.
func (l *Log) Events() map[string]Outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]Outcome, len(l.events))
	for k, v := range l.events {
		out[k] = *v
	}
	return out
}

// plan draws the deliveries of n events over window: some rolled back, some
// redelivered with the same delivery id, some re-published with a new one,
// some that only ever roll back.
func plan(rng *rand.Rand, n int, window time.Duration, chans []Channel) []delivery {
	var out []delivery
	for i := range n {
		ev := fmt.Sprintf("evt-%06d", i)
		ch := pickChannel(rng, chans)
		at := time.Duration(float64(window) * float64(i) / float64(n))
		later := func() time.Duration { return at + time.Duration(rng.Float64()*float64(3*time.Second)) }
		mk := func(when time.Duration, id string, rollback bool) delivery {
			return delivery{at: when, eventID: ev, channel: ch, id: id, payload: payloadFor(ch, ev, i, id), rollback: rollback}
		}
		d0 := fmt.Sprintf("dlv-%06d-0", i)
		switch r := rng.Float64(); {
		case r < 0.03: // rolled back every time: must leave nothing
			out = append(out, mk(at, d0, true), mk(later(), d0, true))
			continue
		case r < 0.11: // a rolled-back attempt, then the broker redelivers
			out = append(out, mk(at, d0, true), mk(later(), d0, false))
		default:
			out = append(out, mk(at, d0, false))
		}
		if rng.Float64() < 0.15 { // delivered twice or more, same delivery id
			for range 1 + rng.IntN(2) {
				out = append(out, mk(later(), d0, false))
			}
		}
		if rng.Float64() < 0.10 { // re-published: new delivery id, same event id
			out = append(out, mk(later(), fmt.Sprintf("dlv-%06d-1", i), false))
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].at < out[b].at })
	return out
}

// channelWeights is how often each channel gets an event.
var channelWeights = map[string]float64{"hook": 5, "refund": 5, "sms-lookup": 4, "sms-resend": 3, "sms-skip": 3, "sms-manual": 3}

func pickChannel(rng *rand.Rand, chans []Channel) string {
	total := 0.0
	for _, c := range chans {
		total += cmp.Or(channelWeights[c.Name], 1)
	}
	r := rng.Float64() * total
	for _, c := range chans {
		if r -= cmp.Or(channelWeights[c.Name], 1); r < 0 {
			return c.Name
		}
	}
	return chans[len(chans)-1].Name
}

// payloadFor is the payload a delivery enqueues. Webhook payloads carry the
// delivery id, so a re-published event differs only there; Stripe payloads are
// strict (no unknown fields), so for them the delivery id lives only in the
// producer's own table.
func payloadFor(channel, eventID string, i int, deliveryID string) string {
	switch channel {
	case "hook":
		return fmt.Sprintf(`{"event":%q,"delivery_id":%q,"n":%d}`, eventID, deliveryID, i)
	case "refund":
		return fmt.Sprintf(`{"type":"refund","payment_intent":"pi_chaos_%06d","amount":%d}`, i, 100+i%900)
	default:
		return fmt.Sprintf(`{"to":%q,"body":%q}`, smsNumber(i), channel+" "+eventID)
	}
}

// smsNumber is a distinct E.164 number per event, clear of Twilio's magic test numbers.
func smsNumber(i int) string { return fmt.Sprintf("+1555%07d", i) }

// The producers' own table, chaos_deliveries: the application's side of each
// enqueue, written in the same transaction, so a committed delivery leaves its
// row. It is the producers' table, not one of effectd's, so its SQL stays here.
const (
	produceSchema = `CREATE TABLE IF NOT EXISTS public.chaos_deliveries (
	delivery_id text PRIMARY KEY, event_id text NOT NULL, at timestamptz NOT NULL DEFAULT now())`
	recordDeliverySQL = `INSERT INTO public.chaos_deliveries (delivery_id, event_id) VALUES ($1, $2)
		ON CONFLICT (delivery_id) DO NOTHING`
	deliveredEventsSQL = `SELECT DISTINCT event_id FROM public.chaos_deliveries`
	deliveryIDsSQL     = `SELECT delivery_id FROM public.chaos_deliveries`
)

// On Citus the producers' table is producer.orders, distributed by bucket,
// which effectd's tables are co-located with (database.citus in the
// configuration); each event has its bucket (bucketOf), and the enqueue names
// it. public.chaos_deliveries is a view of it, so that the checker reads the
// producers' side the same way in both modes. It is made before effectd
// migrate, which checks it.
const (
	citusProduceSchema = `CREATE SCHEMA IF NOT EXISTS producer;
CREATE TABLE IF NOT EXISTS producer.orders (
	bucket int NOT NULL, id bigserial NOT NULL, delivery_id text NOT NULL, event_id text NOT NULL,
	at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (bucket, delivery_id));
SELECT create_distributed_table('producer.orders', 'bucket', shard_count => 8)
	WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'producer.orders'::regclass);
CREATE OR REPLACE VIEW public.chaos_deliveries AS SELECT delivery_id, event_id, at FROM producer.orders;`
	citusRecordSQL = `INSERT INTO producer.orders (bucket, delivery_id, event_id) VALUES ($1, $2, $3)
		ON CONFLICT (bucket, delivery_id) DO NOTHING`
	citusEnqueueSQL = `SELECT effectd.enqueue(event_id => $1, channel => $2, payload => $3::jsonb, bucket => $4, not_before => $5)`
)

// bucketOf is the producer's bucket of an event, 0..buckets-1: every delivery
// of an event lands in the same bucket.
func bucketOf(eventID string, buckets int) int {
	h := fnv.New32a()
	h.Write([]byte(eventID))
	return int(h.Sum32() % uint32(buckets))
}

// producerColumn reads the one text column that sql selects from the
// producers' table.
func producerColumn(ctx context.Context, db query.DB, sql string) ([]string, error) {
	rows, err := db.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// produce runs workers that take each group of deliveries (one transaction:
// a delivery, or a batch of them, verbs.go) at the planned time of its first,
// retrying failed transactions as a broker would (bounded). buckets is the
// producer's bucket count on Citus, 0 on one PostgreSQL.
func produce(ctx context.Context, pool *pgxpool.Pool, groups [][]delivery, workers, buckets int, log *Log) {
	start := time.Now()
	ch := make(chan []delivery)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := range ch {
				deliver(ctx, pool, g, buckets, log)
			}
		}()
	}
	for _, g := range groups {
		if wait := time.Until(start.Add(g[0].at)); wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		if ctx.Err() != nil {
			break
		}
		ch <- g
	}
	close(ch)
	wg.Wait()
}

// singles is each delivery in a transaction of its own.
func singles(ds []delivery) [][]delivery {
	out := make([][]delivery, len(ds))
	for i := range ds {
		out[i] = ds[i : i+1]
	}
	return out
}

// errUnknownCommit marks a COMMIT whose outcome the producer cannot know.
var errUnknownCommit = errors.New("commit outcome unknown")

// deliver handles one transaction's deliveries (one, or a batch of them
// sharing its fate), retrying a failed transaction up to 30 times over about
// a minute, like a broker redelivering an unacknowledged message. A refusal
// no retry cures (refusal: a constraint, out of shared memory) is recorded
// for each event and not retried: the broker parks the message, as it would
// after a few tries, and the checker judges the refusal.
func deliver(ctx context.Context, pool *pgxpool.Pool, g []delivery, buckets int, log *Log) {
	each := func(f func(d delivery, o *Outcome)) {
		for _, d := range g {
			log.update(d.eventID, d.channel, func(o *Outcome) { f(d, o) })
		}
	}
	each(func(_ delivery, o *Outcome) { o.Deliveries++ })
	if g[0].many {
		log.mu.Lock()
		log.batches, log.batched = log.batches+1, log.batched+len(g)
		log.mu.Unlock()
	}
	for try := 0; try < 30 && ctx.Err() == nil; try++ {
		began := time.Now()
		inserted, err := transact(ctx, pool, g, buckets)
		if _, bad := refusal(err); bad {
			for _, d := range g { // log.refused takes the lock each takes
				log.refused(d.eventID, err)
			}
			return
		}
		switch {
		case err == nil && g[0].rollback:
			each(func(_ delivery, o *Outcome) { o.RolledBack++ })
			return
		case err == nil:
			log.mu.Lock()
			log.commits = append(log.commits, commitTiming{began, time.Since(began)})
			log.mu.Unlock()
			for i, d := range g {
				log.update(d.eventID, d.channel, func(o *Outcome) { o.committed(began, inserted[i], d) })
				if log.afterCommit != nil {
					log.afterCommit(d.eventID)
				}
			}
			return
		case errors.Is(err, errUnknownCommit):
			each(func(_ delivery, o *Outcome) { o.Maybe = true })
		}
		log.mu.Lock()
		log.errors++
		log.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(100+50*try) * time.Millisecond):
		}
	}
}

// committed counts a committed delivery d of a transaction that began at
// began, which enqueue answered inserted (true: a new intent).
func (o *Outcome) committed(began time.Time, inserted bool, d delivery) {
	o.Committed = true
	if o.FirstCommit.IsZero() || began.Before(o.FirstCommit) {
		o.FirstCommit = began
	}
	if inserted {
		o.Inserted++
		o.Ahead = o.Ahead || d.moveDays > 0
	}
}

// transact is the producer's transaction: its own write for each delivery
// of g, then the enqueue (one call each, or one enqueue_many for the batch:
// enqueueAll), then COMMIT (or ROLLBACK for deliveries planned to fail). It
// returns, for each delivery, whether its enqueue made a new intent. On
// Citus (buckets > 0) each write and intent is on its event's bucket's shard.
func transact(ctx context.Context, pool *pgxpool.Pool, g []delivery, buckets int) (inserted []bool, err error) {
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tx, err := pool.BeginTx(tctx, pgx.TxOptions{IsoLevel: g[0].iso})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(tctx))
	for _, d := range g {
		if buckets > 0 {
			_, err = tx.Exec(tctx, citusRecordSQL, bucketOf(d.eventID, buckets), d.id, d.eventID)
		} else {
			_, err = tx.Exec(tctx, recordDeliverySQL, d.id, d.eventID)
		}
		if err != nil {
			return nil, err
		}
	}
	if inserted, err = enqueueAll(tctx, tx, g, buckets); err != nil {
		return nil, err
	}
	for i, d := range g {
		if inserted[i] && d.moveDays != 0 {
			if err := moveIntent(tctx, tx, d, buckets); err != nil {
				return nil, err
			}
		}
	}
	if g[0].rollback {
		return nil, tx.Rollback(tctx)
	}
	if err := tx.Commit(tctx); err != nil {
		if errors.Is(err, pgx.ErrTxCommitRollback) {
			return nil, err // the server said ROLLBACK: certainly not committed
		}
		return nil, fmt.Errorf("%w: %v", errUnknownCommit, err)
	}
	return inserted, nil
}

// enqueueAll enqueues g's deliveries in tx: one that is not many with
// effectd.enqueue (dispatcher.Enqueue on one node, the SQL function with its
// bucket on Citus), a batch with enqueueMany. It returns, for each, whether
// it made a new intent.
func enqueueAll(ctx context.Context, tx pgx.Tx, g []delivery, buckets int) ([]bool, error) {
	if g[0].many {
		return enqueueMany(ctx, tx, g, buckets)
	}
	d := g[0]
	var inserted bool
	var err error
	if buckets > 0 {
		err = tx.QueryRow(ctx, citusEnqueueSQL, d.eventID, d.channel, d.payload, bucketOf(d.eventID, buckets), d.notBeforeAt()).Scan(&inserted)
	} else {
		inserted, err = dispatcher.Enqueue(ctx, tx, d.intent())
	}
	return []bool{inserted}, err
}
