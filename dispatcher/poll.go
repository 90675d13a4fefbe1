package dispatcher

import (
	"context"
	"time"

	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/statemachine"
)

// Poller is a Provider that can tell what became of an effect it accepted:
// the object's status, the delivery it maps to (accepted, delivered,
// undelivered; "" when it says nothing), the provider's detail, and whether
// the effect was reversed after it had succeeded.
type Poller interface {
	Poll(ctx context.Context, ref string) (status, delivery, detail string, reversal bool, err error)
}

// pollBatch bounds the intents one round polls per channel.
const pollBatch = 100

// poller asks providers what became of accepted effects every interval.
type poller struct {
	loop
	d        *Dispatcher
	interval time.Duration
}

// Start polls every interval until Stop.
func (pl *poller) Start(ctx context.Context) { pl.start(ctx, pl.run) }

// Stop cancels a round in progress and waits for it; an answer already
// received is still recorded.
func (pl *poller) Stop() { pl.stop() }

func (pl *poller) run(ctx context.Context) {
	every(ctx, pl.interval, nil, func() {
		if _, err := pl.pollDeliveries(ctx); err != nil {
			pl.d.logDB(ctx, "polling deliveries", err)
		}
	})
}

// pollDeliveries asks the provider, for each SENT intent whose delivery is
// not final and whose next delay of the channel's delivery_poll has passed,
// what became of it, and applies the answer through the delivery table,
// when the store lets this instance poll (storage.Engine.LockPolls: on one
// PostgreSQL one instance at a time; in the distributed mode each instance
// polls the buckets it holds). A channel with a rate polls at most that many
// intents a second. It returns how many intents it
// polled.
func (pl *poller) pollDeliveries(ctx context.Context) (int, error) {
	d := pl.d
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	unlock, ok, err := d.store.LockPolls(ctx, conn)
	if err != nil || !ok {
		return 0, err
	}
	defer unlock()
	total := 0
	for _, ch := range d.chans {
		p := ch.policy.Load()
		delays := p.DeliveryPoll.List()
		if ch.poller == nil || len(delays) == 0 || ch.paused.Load() {
			continue
		}
		ds := make([]time.Duration, len(delays))
		for i, dl := range delays {
			ds[i] = dl.D()
		}
		list, err := d.store.PollDue(ctx, conn, ch.Name, ds, pollBatch)
		if err != nil {
			return total, err
		}
		var pace *time.Ticker
		if p.RatePerSecond > 0 {
			pace = time.NewTicker(time.Duration(float64(time.Second) / p.RatePerSecond))
		}
		for _, x := range list {
			if pace != nil {
				select {
				case <-ctx.Done():
				case <-pace.C:
				}
			}
			if ctx.Err() != nil {
				break
			}
			if err := pl.pollOne(ctx, conn, ch, x); err != nil {
				d.logDB(ctx, "recording a delivery poll", err, append([]any{"intent", x.ID}, traceAttrs(x.Traceparent)...)...)
			}
			total++
		}
		if pace != nil {
			pace.Stop()
		}
	}
	return total, ctx.Err()
}

// pollOne asks the provider about one intent and records the answer, in a
// span of the intent's trace when tracing is on (startPoll, endPollSpan).
func (pl *poller) pollOne(ctx context.Context, conn query.DB, ch *channel, x intentdb.DuePoll) (err error) {
	from := statemachine.Delivery(x.Delivery)
	to, changed, moved := from, false, false
	var pollErr error
	ctx, span := pl.d.startPoll(ctx, ch, x)
	if span != nil {
		defer func() { endPollSpan(span, to, pollErr, err, moved) }()
	}
	started := time.Now()
	pctx, cancel := context.WithTimeout(ctx, ch.policy.Load().Lease.D())
	_, delivery, detail, reversal, pollErr := ch.poller.Poll(pctx, x.ProviderRef)
	cancel()
	detail = validText(detail)
	var outcome, errText string
	if pollErr != nil {
		outcome, errText = "poll failed", dbText(pollErr.Error(), maxErrorText)
	} else {
		to, changed = statemachine.Report(from, statemachine.Delivery(delivery), reversal)
		outcome = "poll: " + detail + " → " + string(to)
	}
	target := ""
	if changed {
		target = string(to)
	}
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), pl.d.cfg.WriteTimeout)
	defer wcancel()
	poll := intentdb.Poll{IntentID: x.ID, Key: x.Key, Attempts: x.Attempts, From: string(from), To: target,
		Detail: detail, StartedAt: started, Outcome: outcome, Error: errText, ProviderRef: x.ProviderRef}
	moved, err = pl.d.store.RecordPoll(wctx, conn, poll, x.Bucket)
	if err != nil {
		return err
	}
	if moved {
		pl.d.countDelivery(ch.Name, EventResult{From: from, To: to}, x.Since)
	}
	return nil
}
