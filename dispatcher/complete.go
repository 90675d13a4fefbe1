package dispatcher

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/statemachine"
)

// completion is the outcome of one claimed intent, written in batches.
type completion struct {
	id          int64
	bucket      int64     // distributed mode: the intent's bucket
	key         string    // the intent's idempotency key: with id, which intent this is
	created     time.Time // the intent's created_at: the partition its row is in
	attempts    int32
	channel     string
	event       statemachine.Event // ignored when stayInDoubt
	stayInDoubt bool               // keep SENDING, the lease ending the channel's grace after the call: the reconciler settles it then
	outcome     string             // recorded on the attempt row
	ref, err    string
	logErr      string    // err with the channel's redacted payload values masked; empty: err quotes no payload
	next        time.Time // next attempt, for retries
	started     time.Time
	finished    time.Time
	called      bool   // a provider call was made (false for max_age skips)
	traceparent string // the producer's trace context: its log lines name the trace
}

// completers write the workers' outcomes in batches: each blocks for the
// first outcome in the queue, takes whatever else is already queued, and
// writes them in one statement. Under load batches grow by themselves; when
// idle each outcome is written at once.
type completers struct {
	d     *Dispatcher
	n     int             // how many write concurrently
	batch int             // most outcomes one statement writes
	queue chan completion // the workers' outcomes
	wg    sync.WaitGroup
}

func newCompleters(d *Dispatcher, n, batch, queue int) *completers {
	return &completers{d: d, n: n, batch: batch, queue: make(chan completion, queue)}
}

// Start runs the completers until Stop.
func (cs *completers) Start(ctx context.Context) {
	for range cs.n {
		cs.wg.Add(1)
		go cs.run()
	}
}

// Stop writes every queued outcome and waits for the completers to end. The
// workers must have stopped first: nothing may be queued after it.
func (cs *completers) Stop() {
	close(cs.queue)
	cs.wg.Wait()
}

func (cs *completers) run() {
	defer cs.wg.Done()
	conn := newHeldConn(cs.d.held)
	defer conn.release()
	batch := make([]completion, 0, cs.batch)
	for first := range cs.queue {
		batch = append(batch[:0], first)
	drain:
		for len(batch) < cap(batch) {
			select {
			case c, ok := <-cs.queue:
				if !ok {
					break drain
				}
				batch = append(batch, c)
			default:
				break drain
			}
		}
		cs.d.writeCompletions(&conn, batch)
	}
}

// A batch whose write failed is written again after completeRetryWait,
// doubling, up to completeRetries times.
const (
	completeRetries   = 5
	completeRetryWait = 100 * time.Millisecond
)

// writeCompletions applies a batch as fenced compare-and-sets. Outcomes are
// written even while shutting down, with a bounded, uncancelled context. Each
// bucket's outcomes are written by a statement of their own, on the bucket's
// shard in the distributed mode (one PostgreSQL's rows are all of bucket 0).
func (d *Dispatcher) writeCompletions(conn *heldConn, batch []completion) {
	byBucket := map[int64][]completion{}
	for _, c := range batch {
		byBucket[c.bucket] = append(byBucket[c.bucket], c)
	}
	for _, group := range byBucket {
		d.writeBucket(conn, group)
	}
}

// writeBucket is writeCompletions for a batch of one bucket.
func (d *Dispatcher) writeBucket(conn *heldConn, batch []completion) {
	fenced, err := d.complete(conn, batch, true)
	if err != nil {
		return
	}
	// A call's answer whose row changed while the statement waited for it (a
	// provider event settling it, most often: Twilio's first status callback
	// races the create call's answer) is written again by a statement that
	// sees the change, and so can tell an event that settled it first.
	var raced []completion
	for _, c := range batch {
		if fenced[c.attemptKey()] == racedOut {
			raced = append(raced, c)
		}
	}
	if len(raced) > 0 {
		// On an error these rows, settled by someone else, keep racedOut: they
		// lack their send attempt, and count nowhere.
		if again, err := d.complete(conn, raced, false); err == nil {
			for _, c := range raced {
				delete(fenced, c.attemptKey())
			}
			for k, f := range again {
				fenced[k] = f
			}
		}
	}
	d.countCompletions(batch, fenced)
}

// complete writes batch, retrying a few times, and says which of its
// completions were not applied, and why; recheck asks for racedOut (see
// intentdb.Complete). An error is logged here.
func (d *Dispatcher) complete(conn *heldConn, batch []completion, recheck bool) (map[attemptKey]fence, error) {
	var b intentdb.CompleteBatch
	for _, c := range batch {
		q := intentdb.Completion{ID: c.id, Key: c.key, CreatedAt: c.created, Attempts: c.attempts, ProviderRef: c.ref, LastError: c.err, NextAttemptAt: c.finished,
			StartedAt: c.started, FinishedAt: c.finished, Outcome: c.outcome, Called: c.called}
		if !c.next.IsZero() {
			q.NextAttemptAt = c.next
		}
		if c.stayInDoubt {
			q.Status = string(statemachine.Sending)
			q.LookAfter = d.byName[c.channel].policy.Load().GraceAfterCall()
			b.Add(q)
			continue
		}
		to, err := statemachine.Next(statemachine.Sending, c.event)
		if err != nil {
			panic(err) // the dispatcher only emits events allowed from SENDING
		}
		q.Status = string(to)
		if to == statemachine.Sent {
			q.Delivery = string(sentDelivery(d.byName[c.channel].Kind))
		}
		b.Add(q)
	}
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), d.cfg.WriteTimeout)
		fenced, err := d.runComplete(ctx, conn, &b, recheck, batch[0].bucket)
		cancel()
		if err == nil {
			return fenced, nil
		}
		// The rows stay SENDING: if the database does not come back before their
		// leases end, the reconciler settles them. Retry a few times first.
		if try >= completeRetries {
			d.log.Error("recording outcomes failed; the reconciler will settle these rows", "rows", len(batch), "error", err)
			return nil, err
		}
		d.log.Warn("recording outcomes failed; retrying", "rows", len(batch), "error", err)
		time.Sleep(completeRetryWait << try)
	}
}

// attemptKey names one completion of a batch: one batch may hold two
// outcomes of one intent (an attempt whose outcome waited in the queue while
// the reconciler settled it, and the next attempt's).
type attemptKey struct {
	id       int64
	attempts int32
}

func (c completion) attemptKey() attemptKey { return attemptKey{c.id, c.attempts} }

// fence is why a completion was not applied.
type fence int

const (
	fencedOut    fence = iota + 1 // someone else settled the row
	settledEarly                  // a provider event settled it SENT with this call's reference
	racedOut                      // the row changed while the statement waited for it: not recorded, to be written again
	lostIntent                    // no row is this intent any more (its id now names another, or none): not recorded
)

// runComplete writes b and says which of its completions were not applied, and why.
func (d *Dispatcher) runComplete(ctx context.Context, conn *heldConn, b *intentdb.CompleteBatch, recheck bool, bucket int64) (map[attemptKey]fence, error) {
	var rows []intentdb.Fenced
	err := conn.use(ctx, func(db query.TxDB) (err error) {
		rows, err = d.store.Complete(ctx, db, b, recheck, bucket)
		return err
	})
	if err != nil {
		return nil, err
	}
	var fenced map[attemptKey]fence
	for _, f := range rows {
		if fenced == nil {
			fenced = map[attemptKey]fence{}
		}
		switch {
		case f.SettledEarly:
			fenced[attemptKey{f.ID, f.Attempts}] = settledEarly
		case f.Raced:
			fenced[attemptKey{f.ID, f.Attempts}] = racedOut
		case f.Lost:
			fenced[attemptKey{f.ID, f.Attempts}] = lostIntent
		default:
			fenced[attemptKey{f.ID, f.Attempts}] = fencedOut
		}
	}
	return fenced, nil
}

func (d *Dispatcher) countCompletions(batch []completion, fenced map[attemptKey]fence) {
	for _, c := range batch {
		switch fenced[c.attemptKey()] {
		case settledEarly:
			// Not a conflict: the provider's callback told of the call first.
			d.intentLog(c.traceparent).Info("provider call answered; the intent was already settled by its callback", "intent", c.id, "channel", c.channel, "attempt", c.attempts, "ref", c.ref)
			continue
		case racedOut:
			continue
		case lostIntent:
			// The intent is gone: a failover lost the commit that enqueued it,
			// and its id may now name another intent. This line is the call's
			// only record; a sweep of the channel lists its effect as an orphan.
			d.m.fenced.WithLabelValues(c.channel).Inc()
			d.intentLog(c.traceparent).Error("provider call made for an intent that no longer exists (lost in a database failover?); the call is not recorded on any row",
				"intent", c.id, "key", c.key, "channel", c.channel, "attempt", c.attempts, "outcome", c.outcome, "ref", c.ref)
			continue
		case fencedOut:
			d.m.fenced.WithLabelValues(c.channel).Inc()
			d.intentLog(c.traceparent).Warn("outcome fenced out: the row was settled by someone else", "intent", c.id, "channel", c.channel, "attempt", c.attempts, "outcome", c.outcome)
			continue
		}
		d.m.outcomes.WithLabelValues(c.channel, c.outcome).Inc()
		if c.outcome == "sent" {
			d.m.deliveries.WithLabelValues(c.channel, string(sentDelivery(d.byName[c.channel].Kind))).Inc()
		}
		if c.outcome == "retry" {
			d.m.retries.WithLabelValues(c.channel).Inc()
		}
		if c.err != "" {
			d.intentLog(c.traceparent).Warn("provider call failed", "intent", c.id, "channel", c.channel, "attempt", c.attempts, "outcome", c.outcome, "error", cmp.Or(c.logErr, c.err))
		} else if d.log.Enabled(context.Background(), slog.LevelDebug) {
			d.intentLog(c.traceparent).Debug("intent sent", "intent", c.id, "channel", c.channel, "attempt", c.attempts, "ref", c.ref)
		}
	}
}

// sentDelivery is what SENT tells of a delivery: a webhook receiver that
// answered 2xx has it; Stripe and Twilio have accepted the call, and say later
// what became of it.
func sentDelivery(kind string) statemachine.Delivery {
	if kind == "webhook" {
		return statemachine.Delivered
	}
	return statemachine.Accepted
}
