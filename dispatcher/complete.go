package dispatcher

import (
	"cmp"
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/statemachine"
)

// completion is the outcome of one claimed intent, written in batches.
type completion struct {
	id          int64
	attempts    int32
	channel     string
	event       statemachine.Event // ignored when stayInDoubt
	stayInDoubt bool               // keep SENDING with the lease ended: the reconciler settles it
	outcome     string             // recorded on the attempt row
	ref, err    string
	logErr      string    // err with the channel's redacted payload values masked; empty: err quotes no payload
	next        time.Time // next attempt, for retries
	started     time.Time
	finished    time.Time
	called      bool // a provider call was made (false for max_age skips)
}

// completeLoop writes completions in batches: it blocks for the first, takes
// whatever else is already queued, and writes them in one statement. Under load
// batches grow by themselves; when idle each outcome is written at once.
func (d *Dispatcher) completeLoop() {
	defer d.completers.Done()
	batch := make([]completion, 0, d.cfg.ClaimBatch)
	for first := range d.done {
		batch = append(batch[:0], first)
	drain:
		for len(batch) < cap(batch) {
			select {
			case c, ok := <-d.done:
				if !ok {
					break drain
				}
				batch = append(batch, c)
			default:
				break drain
			}
		}
		d.writeCompletions(batch)
	}
}

// writeCompletions applies a batch as fenced compare-and-sets. Outcomes are
// written even while shutting down, with a bounded, uncancelled context.
func (d *Dispatcher) writeCompletions(batch []completion) {
	n := len(batch)
	ids := make([]int64, n)
	attempts := make([]int32, n)
	statuses := make([]string, n)
	refs := make([]string, n)
	errs := make([]string, n)
	next := make([]time.Time, n)
	started := make([]time.Time, n)
	finished := make([]time.Time, n)
	outcomes := make([]string, n)
	called := make([]bool, n)
	delivery := make([]string, n)
	for i, c := range batch {
		ids[i], attempts[i], refs[i], errs[i], outcomes[i], called[i] = c.id, c.attempts, c.ref, c.err, c.outcome, c.called
		started[i], finished[i] = c.started, c.finished
		next[i] = c.finished
		if !c.next.IsZero() {
			next[i] = c.next
		}
		if c.stayInDoubt {
			statuses[i] = string(statemachine.Sending)
			continue
		}
		to, err := statemachine.Next(statemachine.Sending, c.event)
		if err != nil {
			panic(err) // the dispatcher only emits events allowed from SENDING
		}
		statuses[i] = string(to)
		if to == statemachine.Sent {
			delivery[i] = string(sentDelivery(d.byName[c.channel].Kind))
		}
	}
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), d.cfg.WriteTimeout)
		fenced, err := d.runComplete(ctx, ids, attempts, statuses, refs, errs, next, started, finished, outcomes, called, delivery)
		cancel()
		if err == nil {
			d.countCompletions(batch, fenced)
			return
		}
		// The rows stay SENDING: if the database does not come back before their
		// leases end, the reconciler settles them. Retry a few times first.
		if try >= 5 {
			d.log.Error("recording outcomes failed; the reconciler will settle these rows", "rows", n, "error", err)
			return
		}
		d.log.Warn("recording outcomes failed; retrying", "rows", n, "error", err)
		time.Sleep(time.Duration(100<<try) * time.Millisecond)
	}
}

// fence is why a completion was not applied.
type fence int

const (
	fencedOut    fence = iota + 1 // someone else settled the row
	settledEarly                  // a provider event settled it SENT with this call's reference
)

func (d *Dispatcher) runComplete(ctx context.Context, args ...any) (map[int64]fence, error) {
	rows, err := d.pool.Query(ctx, query.Complete, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var fenced map[int64]fence
	for rows.Next() {
		var id int64
		var early bool
		if err := rows.Scan(&id, &early); err != nil {
			return nil, err
		}
		if fenced == nil {
			fenced = map[int64]fence{}
		}
		fenced[id] = fencedOut
		if early {
			fenced[id] = settledEarly
		}
	}
	return fenced, rows.Err()
}

func (d *Dispatcher) countCompletions(batch []completion, fenced map[int64]fence) {
	for _, c := range batch {
		switch fenced[c.id] {
		case settledEarly:
			d.log.Debug("outcome already recorded by a provider event", "intent", c.id, "channel", c.channel, "ref", c.ref)
			continue
		case fencedOut:
			d.m.fenced.WithLabelValues(c.channel).Inc()
			d.log.Warn("outcome fenced out: the row was settled by someone else", "intent", c.id, "channel", c.channel, "attempt", c.attempts, "outcome", c.outcome)
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
			d.log.Warn("provider call failed", "intent", c.id, "channel", c.channel, "attempt", c.attempts, "outcome", c.outcome, "error", cmp.Or(c.logErr, c.err))
		} else if d.log.Enabled(context.Background(), slog.LevelDebug) {
			d.log.Debug("intent sent", "intent", c.id, "channel", c.channel, "attempt", c.attempts, "ref", c.ref)
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

// jitteredBackoff is exponential from the policy's base, capped at its max,
// with equal jitter (half fixed, half random), and never earlier than a
// provider's Retry-After.
func jitteredBackoff(p Policy, attempt int, retryAfter time.Duration) time.Duration {
	d := p.Backoff.Base.D()
	for i := 1; i < attempt && d < p.Backoff.Max.D(); i++ {
		d *= 2
	}
	d = min(d, p.Backoff.Max.D())
	d = d/2 + rand.N(d/2+1)
	return max(d, retryAfter)
}
