package dispatcher

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectd/effectd/dispatcher/internal/query"
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
	claimedAt  time.Time
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
		rows, err := d.claim(ctx, ch, n)
		if err != nil {
			d.logDB(ctx, "claiming intents", err, "channel", ch.Name)
			continue
		}
		total += len(rows)
		if len(rows) == n {
			full = true
		}
		if len(rows) > 0 && ch.limiter.Limit() > 0 {
			ch.limiter.ReserveN(now, len(rows))
		}
		for i := range rows {
			d.startCall(ch, &rows[i])
		}
	}
	return total, full, blocked, rateWait
}

func (d *Dispatcher) claim(ctx context.Context, ch *channel, n int) ([]claimed, error) {
	lease := ch.policy.Load().Lease.D()
	rows, err := d.pool.Query(ctx, query.Claim, ch.Name, pgtype.Interval{Microseconds: lease.Microseconds(), Valid: true}, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]claimed, 0, n)
	for rows.Next() {
		var c claimed
		if err := rows.Scan(&c.id, &c.eventID, &c.payload, &c.attempts, &c.key, &c.createdAt, &c.occurredAt, &c.claimedAt); err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func (d *Dispatcher) startCall(ch *channel, c *claimed) {
	ch.inflight.Add(1)
	d.m.inflight.WithLabelValues(ch.Name).Inc()
	d.calls.Add(1)
	go func() {
		defer d.calls.Done()
		out := d.call(ch, c)
		ch.inflight.Add(-1)
		d.m.inflight.WithLabelValues(ch.Name).Dec()
		d.poke(d.slot)
		d.done <- out
	}()
}

// call runs one attempt outside any transaction and decides its outcome.
func (d *Dispatcher) call(ch *channel, c *claimed) completion {
	p := ch.policy.Load()
	out := completion{id: c.id, attempts: c.attempts, channel: ch.Name, started: time.Now(), called: true}
	if p.MaxAge > 0 && out.started.Sub(c.occurredAt) > p.MaxAge.D() {
		out.called = false
		out.finished = out.started
		out.event, out.outcome = statemachine.Expire, "skipped"
		out.err = "max_age " + p.MaxAge.String() + " passed before sending"
		return out
	}
	// The call must end before the lease does, or the reconciler could act on a
	// call still in flight.
	ctx, cancel := context.WithTimeout(d.callCtx, p.Lease.D()*9/10)
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
	class := classify(err)
	last := int(c.attempts) >= p.MaxAttempts
	switch {
	case class.maybeSent && !ch.keyed:
		// No key to repeat the call safely: settle it by lookup or policy now.
		out.stayInDoubt, out.outcome = true, "maybe_sent"
		d.poke(d.settle)
	case class.maybeSent && last:
		out.event, out.outcome = statemachine.Doubt, "in_doubt"
	case class.retryable && !last:
		out.event, out.outcome = statemachine.Retry, "retry"
		out.next = out.finished.Add(d.backoff(*p, int(c.attempts), class.retryAfter))
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
