package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/statemachine"
)

// inDoubt is a row whose call may or may not have taken effect.
type inDoubt struct {
	id        int64
	eventID   string
	channel   string
	payload   json.RawMessage
	attempts  int32
	key       string
	createdAt time.Time
	claimedAt time.Time
	status    statemachine.State
}

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
}

// Start settles expired leases until Stop.
func (rc *reconciler) Start(ctx context.Context) { rc.start(ctx, rc.run) }

// Stop cancels the settlements in progress and waits for them. A lookup cut
// short by Stop told nothing: its row is left SENDING with its lease ended, for
// the next instance to settle.
func (rc *reconciler) Stop() { rc.stop() }

func (rc *reconciler) run(ctx context.Context) {
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
	rows, err := d.pool.Query(ctx, query.TakeExpired, n, d.names,
		pgtype.Interval{Microseconds: d.cfg.SettleLease.Microseconds(), Valid: true})
	if err != nil {
		return 0, err
	}
	taken, err := pgx.CollectRows(rows, scanInDoubt)
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
			s, err := d.decide(ctx, r, true, false)
			if err != nil {
				d.release(ctx, r)
				return
			}
			if err := d.apply(ctx, r, &s, ""); err != nil {
				d.logDB(ctx, "settling an in-doubt intent", err, "intent", r.id)
			}
		}()
	}
	wg.Wait()
	return len(taken), nil
}

func scanInDoubt(row pgx.CollectableRow) (inDoubt, error) {
	var r inDoubt
	created, claimed := looseTime{Field: "created_at"}, looseTime{Field: "claimed_at"}
	err := row.Scan(&r.id, &r.eventID, &r.channel, &r.payload, &r.attempts, &r.key, &created, &claimed, &r.status)
	r.createdAt, r.claimedAt = created.Time, claimed.Time
	return r, err
}

// release gives back a row that settleBatch took, its lease ended now, when
// shutdown cut its lookup short.
func (d *Dispatcher) release(ctx context.Context, r inDoubt) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.WriteTimeout)
	defer cancel()
	if _, err := d.pool.Exec(wctx, query.ReleaseLease, r.id, r.attempts, r.key); err != nil {
		d.log.Warn("giving back an in-doubt intent whose lookup shutdown cut short", "intent", r.id, "channel", r.channel, "error", err)
		return
	}
	d.log.Info("lookup cut short by shutdown: the intent is left for the next instance", "intent", r.id, "channel", r.channel)
}

// decide works out how to settle r: by lookup when the policy asks for it and
// the provider can, else by policy. withPolicy=false (an operator's reconcile
// of an IN_DOUBT row) only reports what the lookup found. A lookup that fails
// because ctx ended says nothing about the provider: decide returns ctx's
// error and nothing is settled. On a dry run, a lookup that would repeat the
// call with its key (Replayer) is not called: it could apply the effect.
func (d *Dispatcher) decide(ctx context.Context, r inDoubt, withPolicy, dryRun bool) (effectdtype.Settlement, error) {
	s := effectdtype.Settlement{IntentID: r.id, From: r.status, Outcome: ByPolicy}
	ch := d.byName[r.channel]
	p := ch.policy.Load()
	mode := p.InDoubt
	if mode == policy.InDoubtLookup || !withPolicy {
		replays, _ := ch.looker.(Replayer)
		switch {
		case dryRun && replays != nil && replays.LookupReplays(r.createdAt):
			s.Outcome, s.To = NotLookedUp, r.status
			s.Error = "a dry run does not look up: within the provider's key window the lookup repeats the call with its key, which applies the effect if the first call never arrived"
			return s, nil
		case ch.looker != nil:
			lctx, cancel := context.WithTimeout(ctx, min(p.Lease.D(), d.cfg.SettleLease/2))
			meta := map[string]string{effect.MetaEventID: r.eventID, effect.MetaIntentID: strconv.FormatInt(r.id, 10)}
			ref, found, err := ch.looker.Lookup(lctx, r.key, r.payload, meta, r.createdAt, r.claimedAt)
			cancel()
			switch {
			case err != nil && ctx.Err() != nil:
				return s, fmt.Errorf("lookup cut short: %w", context.Cause(ctx))
			case err != nil:
				s.Outcome, s.Error = LookupAmbiguous, dbText(err.Error(), maxErrorText)
				mode = p.LookupFallback
			case found:
				s.Outcome, s.ProviderRef = LookupFound, validText(ref)
				s.To = mustNext(r.status, statemachine.Found)
				return s, nil
			default:
				s.Outcome = LookupAbsent
				s.To = mustNext(r.status, statemachine.Absent)
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
		s.To = r.status // nothing settled: the operator decides
		return s, nil
	}
	switch mode {
	case policy.InDoubtResend:
		if pastKeyWindow(ch.Kind, r.createdAt, time.Now()) {
			// The provider has forgotten the key: sending again could apply
			// the effect twice. Only a lookup that proves it absent may.
			s.To = mustNext(r.status, statemachine.Doubt)
			s.Error = strings.TrimPrefix(s.Error+"; ", "; ") + "past the provider's idempotency-key window: not sent again without a lookup that proves it absent"
			return s, nil
		}
		s.To = mustNext(r.status, statemachine.Absent)
	case policy.InDoubtSkip:
		s.To = mustNext(r.status, statemachine.Abandon)
	default:
		s.To = mustNext(r.status, statemachine.Doubt)
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
func (d *Dispatcher) apply(ctx context.Context, r inDoubt, s *effectdtype.Settlement, actor string) error {
	d.m.lookups.WithLabelValues(r.channel, s.Outcome).Inc()
	if s.To == s.From {
		return nil
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.WriteTimeout)
	defer cancel()
	q := query.Settlement{IntentID: r.id, Key: r.key, Attempts: r.attempts, From: string(s.From), To: string(s.To),
		ProviderRef: s.ProviderRef, Error: s.Error, StartedAt: time.Now(), Outcome: s.Outcome + " → " + string(s.To)}
	var err error
	if actor == "" {
		s.Applied, err = query.Settle(wctx, d.pool, q)
	} else {
		s.Applied, err = settleAudited(wctx, d.pool, q, actor)
	}
	if err != nil {
		return err
	}
	if s.Applied {
		d.log.Info("in-doubt intent settled", "intent", r.id, "channel", r.channel, "outcome", s.Outcome, "to", s.To)
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
func (d *Dispatcher) Reconcile(ctx context.Context, id int64, dryRun bool, actor string) (effectdtype.Settlement, error) {
	var r inDoubt
	var leaseUntil *time.Time // set while a SENDING row's lease is live
	created, claimed := looseTime{Field: "created_at"}, looseTime{Field: "claimed_at"}
	err := d.pool.QueryRow(ctx, query.SelectForReconcile, id).
		Scan(&r.id, &r.eventID, &r.channel, &r.payload, &r.attempts, &r.key, &created, &claimed, &r.status, &leaseUntil)
	r.createdAt, r.claimedAt = created.Time, claimed.Time
	if errors.Is(err, pgx.ErrNoRows) {
		return effectdtype.Settlement{}, opError(ErrNotFound, "Reconcile(%d)", id)
	}
	if err != nil {
		return effectdtype.Settlement{}, opError(err, "Reconcile(%d)", id)
	}
	switch {
	case r.status == statemachine.Sending && leaseUntil != nil:
		return effectdtype.Settlement{IntentID: id, From: r.status, To: r.status}, opError(&LeaseError{IntentID: id, Until: *leaseUntil}, "Reconcile(%d)", id)
	case r.status != statemachine.Sending && r.status != statemachine.InDoubt:
		return effectdtype.Settlement{}, opError(&statemachine.TransitionError{From: r.status, Event: statemachine.Found}, "Reconcile(%d)", id)
	}
	if d.byName[r.channel] == nil {
		return effectdtype.Settlement{}, opError(fmt.Errorf("%w: channel %q is not configured in this instance", ErrInvalid, r.channel), "Reconcile(%d)", id)
	}
	s, err := d.decide(ctx, r, r.status == statemachine.Sending, dryRun)
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
