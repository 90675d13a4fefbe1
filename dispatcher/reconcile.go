package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/statemachine"
)

// The reconciler takes expired leases reconcileBatchSize at a time and
// settles up to reconcileParallel of them at once (a lookup is a provider
// call, bounded by the channel's lease).
const (
	reconcileBatchSize = 64
	reconcileParallel  = 8
)

// reconciler settles SENDING rows whose lease expired, every interval and at
// once after a maybe-sent call.
type reconciler struct {
	loop
	d        *Dispatcher
	interval time.Duration
	conn     heldConn // expired leases are taken on it
}

// Start settles expired leases until Stop.
func (rc *reconciler) Start(ctx context.Context) { rc.start(ctx, rc.run) }

// Stop cancels the settlements in progress and waits for them. A lookup cut
// short by Stop told nothing: its row is left SENDING with its lease ended, for
// the next instance to settle.
func (rc *reconciler) Stop() { rc.stop() }

func (rc *reconciler) run(ctx context.Context) {
	rc.conn = newHeldConn(rc.d.held)
	defer rc.conn.release()
	every(ctx, rc.interval, rc.d.settle, func() {
		for ctx.Err() == nil {
			n, err := rc.settleBatch(ctx, reconcileBatchSize)
			if err != nil {
				rc.d.logDB(ctx, "settling expired leases", err)
			}
			if n < reconcileBatchSize {
				return
			}
		}
	})
}

// settleBatch takes up to n expired leases and settles each by the channel's
// in_doubt policy. Taking a row extends its lease, so other instances skip it.
func (rc *reconciler) settleBatch(ctx context.Context, n int) (int, error) {
	d := rc.d
	taken, err := d.store.TakeExpired(ctx, rc.conn.use, n, d.names, d.cfg.SettleLease)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, reconcileParallel)
	for _, r := range taken {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			sctx, span := d.startSettle(ctx, r)
			s, err := d.decide(sctx, r, true, false)
			if err != nil {
				d.release(ctx, r)
				if span != nil {
					endSpan(span, "released", true)
				}
				return
			}
			err = d.apply(sctx, r, &s, "")
			if err != nil {
				d.logDB(ctx, "settling an in-doubt intent", err, append([]any{"intent", r.ID}, traceAttrs(r.Traceparent)...)...)
			}
			if span != nil {
				endSpan(span, s.Outcome+" → "+string(s.To), err != nil)
			}
		}()
	}
	wg.Wait()
	return len(taken), nil
}

// release gives back a row that settleBatch took, its lease ended now, when
// shutdown cut its lookup short.
func (d *Dispatcher) release(ctx context.Context, r intentdb.Unsettled) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.WriteTimeout)
	defer cancel()
	if err := intentdb.ReleaseLease(wctx, d.pool, r); err != nil {
		d.intentLog(r.Traceparent).Warn("giving back an in-doubt intent whose lookup shutdown cut short", "intent", r.ID, "channel", r.Channel, "error", err)
		return
	}
	d.intentLog(r.Traceparent).Info("lookup cut short by shutdown: the intent is left for the next instance", "intent", r.ID, "channel", r.Channel)
}

// decide works out how to settle r: by lookup when the policy asks for it and
// the provider can, else by policy. withPolicy=false (an operator's reconcile
// of an IN_DOUBT row) only reports what the lookup found. A lookup that fails
// because ctx ended says nothing about the provider: decide returns ctx's
// error and nothing is settled. On a dry run, a lookup that would repeat the
// call with its key (Replayer) is not called: it could apply the effect.
func (d *Dispatcher) decide(ctx context.Context, r intentdb.Unsettled, withPolicy, dryRun bool) (effectdtype.ReconcileResult, error) {
	s := effectdtype.ReconcileResult{IntentID: r.ID, From: r.Status, Outcome: ByPolicy}
	ch := d.byName[r.Channel]
	p := ch.policy.Load()
	mode := p.InDoubt
	if mode == policy.InDoubtLookup || !withPolicy {
		replays, _ := ch.looker.(Replayer)
		switch {
		case dryRun && replays != nil && replays.LookupReplays(r.CreatedAt):
			s.Outcome, s.To = NotLookedUp, r.Status
			s.Error = "a dry run does not look up: within the provider's key window the lookup repeats the call with its key, which applies the effect if the first call never arrived"
			return s, nil
		case ch.looker != nil:
			lctx, cancel := context.WithTimeout(ctx, min(p.Lease.D(), d.cfg.SettleLease/2))
			lctx, span := d.startChild(lctx, SpanLookup, AttrChannel.String(r.Channel), AttrIntentID.Int64(r.ID), AttrIdempotencyKey.String(r.Key))
			meta := map[string]string{effect.MetaEventID: r.EventID, effect.MetaIntentID: strconv.FormatInt(r.ID, 10)}
			ref, found, err := ch.looker.Lookup(lctx, r.Key, r.Payload, meta, r.CreatedAt, r.ClaimedAt)
			cancel()
			if span != nil {
				endSpan(span, lookupOutcome(found, err), err != nil)
			}
			switch {
			case err != nil && ctx.Err() != nil:
				return s, fmt.Errorf("lookup cut short: %w", context.Cause(ctx))
			case err != nil:
				s.Outcome, s.Error = LookupAmbiguous, dbText(err.Error(), maxErrorText)
				mode = p.LookupFallback
			case found:
				s.Outcome, s.ProviderRef = LookupFound, validText(ref)
				s.To = mustNext(r.Status, statemachine.Found)
				return s, nil
			default:
				s.Outcome = LookupAbsent
				s.To = mustNext(r.Status, statemachine.Absent)
				return s, nil
			}
		case ch.keyed:
			// Sending again with the same key is the lookup: the provider
			// replays the first result instead of applying twice.
			mode = policy.InDoubtResend
		default:
			mode = p.LookupFallback
		}
	}
	if !withPolicy {
		s.To = r.Status // nothing settled: the operator decides
		return s, nil
	}
	switch mode {
	case policy.InDoubtResend:
		if PastKeyWindow(ch.Kind, r.CreatedAt, time.Now()) {
			// The provider has forgotten the key: sending again could apply
			// the effect twice. Only a lookup that proves it absent may.
			s.To = mustNext(r.Status, statemachine.Doubt)
			s.Error = strings.TrimPrefix(s.Error+"; ", "; ") + "past the provider's idempotency-key window: not sent again without a lookup that proves it absent"
			return s, nil
		}
		s.To = mustNext(r.Status, statemachine.Absent)
	case policy.InDoubtSkip:
		s.To = mustNext(r.Status, statemachine.Abandon)
	default:
		s.To = mustNext(r.Status, statemachine.Doubt)
	}
	return s, nil
}

func mustNext(from statemachine.State, ev statemachine.Event) statemachine.State {
	to, err := statemachine.Next(from, ev)
	if err != nil {
		panic(err) // the reconciler only emits events allowed from its states
	}
	return to
}

// apply writes s as a fenced compare-and-set and records the settlement as an
// attempt of kind lookup, in one statement; when an operator asked for it
// (actor), with its audit entry in the same transaction. s.Applied reports
// whether this writer won.
func (d *Dispatcher) apply(ctx context.Context, r intentdb.Unsettled, s *effectdtype.ReconcileResult, actor string) error {
	d.m.lookups.WithLabelValues(r.Channel, s.Outcome).Inc()
	if s.To == s.From {
		return nil
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.WriteTimeout)
	defer cancel()
	q := intentdb.SettleParams{IntentID: r.ID, Key: r.Key, Attempts: r.Attempts, From: string(s.From), To: string(s.To),
		ProviderRef: s.ProviderRef, Error: s.Error, StartedAt: time.Now(), Outcome: s.Outcome + " → " + string(s.To)}
	var err error
	switch {
	case actor == "":
		s.Applied, err = d.store.Settle(wctx, d.pool, q, r.Bucket)
	default:
		s.Applied, err = settleAudited(wctx, d.pool, d.store, q, actor)
	}
	if err != nil {
		return err
	}
	if s.Applied {
		d.intentLog(r.Traceparent).Info("in-doubt intent settled", "intent", r.ID, "channel", r.Channel, "outcome", s.Outcome, "to", s.To)
		if s.To == statemachine.Pending {
			poke(d.wake)
		}
	}
	return nil
}

// Reconcile runs the provider lookup for one intent now: an IN_DOUBT row, or a
// SENDING row whose lease expired. Found settles it SENT and absent PENDING;
// when the lookup cannot tell, an IN_DOUBT row stays for the operator and a
// SENDING row follows the channel's policy. dryRun reports without changing
// anything. A change is audited under actor, in the transaction that makes it.
func (d *Dispatcher) Reconcile(ctx context.Context, id int64, dryRun bool, actor string) (effectdtype.ReconcileResult, error) {
	r, leaseUntil, err := intentdb.SelectUnsettled(ctx, d.pool, id) // leaseUntil: set while a SENDING row's lease is live
	if errors.Is(err, pgx.ErrNoRows) {
		return effectdtype.ReconcileResult{}, opError(ErrNotFound, "Reconcile(%d)", id)
	}
	if err != nil {
		return effectdtype.ReconcileResult{}, opError(err, "Reconcile(%d)", id)
	}
	switch {
	case r.Status == statemachine.Sending && leaseUntil != nil:
		return effectdtype.ReconcileResult{IntentID: id, From: r.Status, To: r.Status}, opError(&LeaseError{IntentID: id, Until: *leaseUntil}, "Reconcile(%d)", id)
	case r.Status != statemachine.Sending && r.Status != statemachine.InDoubt:
		return effectdtype.ReconcileResult{}, opError(&statemachine.TransitionError{From: r.Status, Event: statemachine.Found}, "Reconcile(%d)", id)
	}
	if d.byName[r.Channel] == nil {
		return effectdtype.ReconcileResult{}, opError(fmt.Errorf("%w: channel %q is not configured in this instance", ErrInvalid, r.Channel), "Reconcile(%d)", id)
	}
	s, err := d.decide(ctx, r, r.Status == statemachine.Sending, dryRun)
	if err != nil {
		return s, opError(err, "Reconcile(%d)", id)
	}
	if dryRun {
		return s, nil
	}
	if err := d.apply(ctx, r, &s, actor); err != nil {
		return s, opError(err, "Reconcile(%d)", id)
	}
	return s, nil
}
