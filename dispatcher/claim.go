package dispatcher

import (
	"cmp"
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/statemachine"
)

// claimed is an intent a worker holds under a lease.
type claimed struct {
	id         int64
	eventID    string
	payload    json.RawMessage
	attempts   int32
	key        string
	createdAt  time.Time
	occurredAt time.Time
	deadline   time.Time // local clock: the call must end by then, well inside the lease
	problem    string    // why the row cannot be sent as stored: it is quarantined, not called
}

// Idle waits: after an empty claim the loop polls again after 1, 2, 4 and 8 ms,
// then tells producers to NOTIFY and waits for that, or PollInterval at most.
const (
	spinSteps = 4
	spinMax   = 8 * time.Millisecond
)

func (d *Dispatcher) claimLoop(ctx context.Context) {
	idle := 0
	waiting := false // this instance asked producers to NOTIFY
	for ctx.Err() == nil {
		claimed, full, blocked, rateWait := d.claimRound(ctx)
		if claimed > 0 {
			idle = 0
			if waiting {
				if err := d.setWaiting(ctx, false); err == nil {
					waiting = false
				}
			}
			if full {
				continue
			}
		}
		switch {
		case claimed > 0:
			d.sleep(ctx, time.Millisecond)
		case blocked:
			d.sleep(ctx, cmpPositive(rateWait, d.cfg.PollInterval))
		case idle < spinSteps:
			idle++
			d.sleep(ctx, min(time.Millisecond<<idle, spinMax))
		case !waiting:
			// Ask producers to NOTIFY, then claim once more: an intent committed
			// before the flag was visible is found by that claim.
			if err := d.setWaiting(ctx, true); err != nil {
				d.logDB(ctx, "setting the wake-up flag", err)
				d.sleep(ctx, d.cfg.PollInterval)
			} else {
				waiting = true
			}
		default:
			d.sleep(ctx, d.cfg.PollInterval)
		}
	}
}

func cmpPositive(a, b time.Duration) time.Duration {
	if a > 0 {
		return min(a, b)
	}
	return b
}

// claimRound claims for every channel with room. full reports that some
// channel's claim came back full (more may be due); blocked that some channel
// had no room, by concurrency or by rate.
func (d *Dispatcher) claimRound(ctx context.Context) (total int, full, blocked bool, rateWait time.Duration) {
	now := time.Now()
	for _, ch := range d.chans {
		if ch.paused.Load() {
			continue
		}
		n, wait := ch.room(d.cfg.ClaimBatch, now)
		if n <= 0 {
			blocked = true
			if wait > 0 && (rateWait == 0 || wait < rateWait) {
				rateWait = wait
			}
			continue
		}
		rows, wait, err := d.claim(ctx, ch, n)
		if err != nil {
			d.logDB(ctx, "claiming intents", err, "channel", ch.Name)
			continue
		}
		total += len(rows)
		if len(rows) == n {
			full = true
		}
		if wait > 0 {
			blocked = true
			if rateWait == 0 || wait < rateWait {
				rateWait = wait
			}
		}
		for i := range rows {
			d.startCall(ch, &rows[i])
		}
	}
	return total, full, blocked, rateWait
}

// claim takes up to n due intents of ch. For a rate-limited channel it also
// reports how long until the shared bucket has a token again, when it ran dry.
func (d *Dispatcher) claim(ctx context.Context, ch *channel, n int) ([]claimed, time.Duration, error) {
	p := ch.policy.Load()
	lease := pgtype.Interval{Microseconds: p.Lease.D().Microseconds(), Valid: true}
	// The lease starts at the database's now(), no earlier than this moment on
	// our clock: a deadline counted from here ends inside it.
	deadline := time.Now().Add(p.Lease.D() * 9 / 10)
	rows, err := d.pool.Query(ctx, query.Claim, ch.Name, lease, n, p.RatePerSecond, burst(p.RatePerSecond))
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	out := make([]claimed, 0, n)
	avail := 0.0
	for rows.Next() {
		// Every row claimed here is SENDING now: a scan that failed would strand
		// the batch, so times are read loosely and a row that cannot be sent as
		// stored is quarantined by its worker instead.
		var c claimed
		created, occurred := looseTime{Field: "created_at"}, looseTime{Field: "occurred_at"}
		if err := rows.Scan(&avail, &c.id, &c.eventID, &c.payload, &c.attempts, &c.key, &created, &occurred); err != nil {
			return out, 0, err
		}
		if c.id == 0 {
			continue // nothing claimed: the row only reports the bucket
		}
		c.createdAt, c.occurredAt, c.deadline = created.Time, occurred.Time, deadline
		c.problem = cmp.Or(occurred.Problem, created.Problem, headerProblem("idempotency_key", c.key))
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return out, 0, err
	}
	var wait time.Duration
	if left := avail - float64(len(out)); p.RatePerSecond > 0 && len(out) < n && left < 1 {
		wait = time.Duration((1 - left) / p.RatePerSecond * float64(time.Second))
	}
	return out, wait, nil
}

// minCallTime is the least time left on a lease for a call to start.
const minCallTime = 100 * time.Millisecond

// job is one claimed intent handed to a worker.
type job struct {
	ch *channel
	c  claimed
}

// workerIdle is how long an idle worker waits for another call before it exits.
const workerIdle = 10 * time.Second

// startCall hands c to an idle worker, or starts one. Workers outlive their
// call so that their grown stacks and buffers are reused by the next.
func (d *Dispatcher) startCall(ch *channel, c *claimed) {
	ch.inflight.Add(1)
	d.m.inflight.WithLabelValues(ch.Name).Inc()
	d.calls.Add(1)
	j := job{ch: ch, c: *c}
	select {
	case d.jobs <- j:
	default:
		go d.worker(j)
	}
}

func (d *Dispatcher) worker(j job) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		out := d.call(j.ch, &j.c)
		j.ch.inflight.Add(-1)
		d.m.inflight.WithLabelValues(j.ch.Name).Dec()
		d.poke(d.slot)
		d.done <- out
		d.calls.Done()
		idle.Reset(workerIdle)
		select {
		case j = <-d.jobs:
		case <-idle.C:
			return
		case <-d.quit:
			return
		}
	}
}

// call runs one attempt outside any transaction and decides its outcome.
func (d *Dispatcher) call(ch *channel, c *claimed) completion {
	p := ch.policy.Load()
	out := completion{id: c.id, attempts: c.attempts, channel: ch.Name, started: time.Now(), called: true}
	if c.problem != "" {
		out.called = false
		out.finished = out.started
		out.event, out.outcome = statemachine.Fail, "quarantined"
		out.err = "quarantined, not sent: " + c.problem + "; effectd.enqueue refuses such a value now"
		return out
	}
	if p.MaxAge > 0 && out.started.Sub(c.occurredAt) > p.MaxAge.D() {
		out.called = false
		out.finished = out.started
		out.event, out.outcome = statemachine.Expire, "skipped"
		out.err = "max_age " + p.MaxAge.String() + " passed before sending"
		return out
	}
	if d.beforeCall != nil {
		d.beforeCall(c.id, c.attempts)
	}
	// The call must end before the lease does, or the reconciler could settle
	// (and resend) a call still in flight. A worker that reaches the call too
	// late — paused, or starved — does not call at all: the row goes back to
	// PENDING through the fence, unless the reconciler has settled it already.
	if time.Until(c.deadline) < minCallTime {
		out.called = false
		out.finished = out.started
		out.event, out.outcome, out.next = statemachine.Retry, "retry", out.started
		out.err = "the lease was nearly over before the call started; not called"
		return out
	}
	ctx, cancel := context.WithDeadline(d.callCtx, c.deadline)
	defer cancel()
	meta := map[string]string{MetaEventID: c.eventID, MetaIntentID: strconv.FormatInt(c.id, 10)}
	ref, err := ch.Provider.Send(ctx, c.key, c.payload, meta)
	out.finished = time.Now()
	d.m.calls.WithLabelValues(ch.Name).Observe(out.finished.Sub(out.started).Seconds())
	if err == nil {
		out.event, out.outcome, out.ref = statemachine.Succeed, "sent", ref
		return out
	}
	out.err = truncate(err.Error(), 1000)
	out.logErr = RedactText(out.err, c.payload, ch.Redact)
	class := classify(err)
	if class.retryAfter > 0 {
		d.slowDown(ch, class.retryAfter)
	}
	last := int(c.attempts) >= p.MaxAttempts
	next := out.finished
	if class.retryable {
		next = out.finished.Add(d.backoff(*p, int(c.attempts), class.retryAfter))
	}
	switch {
	case class.maybeSent && (!ch.keyed || pastKeyWindow(ch.Kind, c.createdAt, next)):
		// No key to repeat the call safely (none, or the provider will have
		// forgotten it by the next attempt): settle it by lookup or policy now.
		out.stayInDoubt, out.outcome = true, "maybe_sent"
		d.poke(d.settle)
	case class.maybeSent && last:
		out.event, out.outcome = statemachine.Doubt, "in_doubt"
	case class.retryable && !last:
		out.event, out.outcome = statemachine.Retry, "retry"
		out.next = next
	default:
		out.event, out.outcome = statemachine.Fail, "failed"
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// slowDown honours a provider's Retry-After for the whole channel: this
// instance stops claiming for it, and a rate-limited channel's shared bucket is
// emptied so that every instance does.
func (d *Dispatcher) slowDown(ch *channel, after time.Duration) {
	after = min(after, 5*time.Minute)
	until := time.Now().Add(after).UnixNano()
	for {
		old := ch.coolUntil.Load()
		if old >= until || ch.coolUntil.CompareAndSwap(old, until) {
			break
		}
	}
	if r := ch.policy.Load().RatePerSecond; r > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), d.cfg.WriteTimeout)
		defer cancel()
		if _, err := d.pool.Exec(ctx, query.SlowDown, ch.Name, after.Seconds(), r); err != nil {
			d.log.Warn("slowing the channel down for every instance", "channel", ch.Name, "error", err)
		}
	}
}
