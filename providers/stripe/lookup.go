package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	stripeapi "github.com/stripe/stripe-go/v76"

	"github.com/effectd/effectd/providers/effect"
)

// ReplayWindow is how long after an intent was created Lookup trusts Stripe to
// still hold its idempotency key (Stripe keeps keys for at least 24 hours).
const ReplayWindow = 23 * time.Hour

// KeyWindow is how long after an intent was created the provider trusts
// Stripe to remember its idempotency key: ReplayWindow. The dispatcher reads
// it (dispatcher.KeyWindowed) and refuses to start if its own differs.
func (p *Provider) KeyWindow() time.Duration { return ReplayWindow }

// lookupListLimit bounds how many objects a list lookup reads.
const lookupListLimit = 1000

// Lookup tells whether an in-doubt call took effect. Within ReplayWindow of
// created it repeats the identical call with the same key, so Stripe replays
// the first result; past it, it lists the objects we stamped and matches
// metadata effectd_event_id.
func (p *Provider) Lookup(ctx context.Context, key string, raw json.RawMessage, meta map[string]string, created, claimed time.Time) (ref string, found bool, err error) {
	pl, err := parsePayload(raw)
	if err != nil {
		return "", false, fmt.Errorf("stripe lookup: %w", err)
	}
	if p.LookupReplays(created) {
		return p.replay(ctx, key, pl, meta)
	}
	return p.list(ctx, pl, meta, created)
}

// LookupReplays reports whether Lookup, for an intent created at created,
// repeats the call with its key (inside Stripe's key window), which applies the
// effect if the first call never reached Stripe.
func (p *Provider) LookupReplays(created time.Time) bool {
	return p.now().Sub(created) < ReplayWindow
}

// replay repeats the call with the same key and parameters.
func (p *Provider) replay(ctx context.Context, key string, pl payload, meta map[string]string) (string, bool, error) {
	op := "stripe lookup " + pl.Type + " by key replay"
	ref, err := p.call(ctx, op, func(ctx context.Context) (string, error) { return p.create(ctx, key, pl, meta) })
	if err == nil {
		return ref, true, nil
	}
	var se *Error
	if errors.As(err, &se) && se.Replayed && se.Status >= 400 &&
		se.Status != http.StatusConflict && se.Status != http.StatusTooManyRequests {
		// Stripe saved an error as the key's first result: the first call
		// executed and failed, so it created nothing.
		return "", false, nil
	}
	return "", false, err
}

// list finds the object by what was stamped on it, past the key window.
func (p *Provider) list(ctx context.Context, pl payload, meta map[string]string, created time.Time) (string, bool, error) {
	op := "stripe lookup " + pl.Type + " by list"
	event := meta[effect.MetaEventID]
	if event == "" {
		return "", false, fmt.Errorf("%s: meta %s is empty", op, effect.MetaEventID)
	}
	ctx, x, cancel := p.traced(ctx)
	defer cancel()
	matches, complete, consistent, err := p.stamped(ctx, pl, event, created)
	switch {
	case err != nil:
		return "", false, classify(op, err, x)
	case len(matches) == 1:
		return matches[0].Ref, true, nil
	case len(matches) > 1:
		refs := make([]string, len(matches))
		for i, o := range matches {
			refs[i] = o.Ref
		}
		return "", false, fmt.Errorf("%s: ambiguous: %d objects carry %s=%q: %s",
			op, len(matches), effect.MetaEventID, event, strings.Join(refs, ", "))
	case !complete:
		return "", false, fmt.Errorf("%s: no match in the newest %d objects; not reading further", op, lookupListLimit)
	case !consistent:
		return "", false, fmt.Errorf("%s: the search API found no payment intent with %s=%q, but search is eventually consistent: cannot tell", op, effect.MetaEventID, event)
	}
	return "", false, nil
}

// stamped lists, whatever their time, the objects of pl's type stamped with
// metadata effectd_event_id = event: the refunds of its payment intent or
// charge, the transfers of its transfer group, the payment intents of its
// customer created since an hour before created (without a customer, the
// search API). complete is false when the listing stopped at
// lookupListLimit objects; consistent is false for the search API, which is
// eventually consistent: a miss there proves nothing.
func (p *Provider) stamped(ctx context.Context, pl payload, event string, created time.Time) (matches []effect.Object, complete, consistent bool, err error) {
	seen := 0
	match := func(o effect.Object, _ map[string]string) bool {
		seen++
		if o.EventID == event {
			matches = append(matches, o)
		}
		return seen < lookupListLimit
	}
	consistent = true
	switch pl.Type {
	case "refund":
		lp := &stripeapi.RefundListParams{}
		if pl.PaymentIntent != "" {
			lp.PaymentIntent = stripeapi.String(pl.PaymentIntent)
		} else {
			lp.Charge = stripeapi.String(pl.Charge)
		}
		lp.Context, lp.Limit = ctx, stripeapi.Int64(100)
		err = walk(p.api.Refunds.List(lp), match)
	case "transfer":
		lp := &stripeapi.TransferListParams{TransferGroup: stripeapi.String(event)}
		lp.Context, lp.Limit = ctx, stripeapi.Int64(100)
		err = walk(p.api.Transfers.List(lp), match)
	case "payment_intent":
		if pl.Customer != "" {
			lp := &stripeapi.PaymentIntentListParams{
				Customer:     stripeapi.String(pl.Customer),
				CreatedRange: &stripeapi.RangeQueryParams{GreaterThanOrEqual: created.Add(-time.Hour).Unix()},
			}
			lp.Context, lp.Limit = ctx, stripeapi.Int64(100)
			err = walk(p.api.PaymentIntents.List(lp), match)
			break
		}
		// No customer to list by: only the search API is left.
		consistent = false
		sp := &stripeapi.PaymentIntentSearchParams{}
		sp.Context, sp.Limit = ctx, stripeapi.Int64(100)
		sp.Query = fmt.Sprintf("metadata['%s']:'%s'", effect.MetaEventID, strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(event))
		err = walk(p.api.PaymentIntents.Search(sp), match)
	}
	return matches, seen < lookupListLimit, consistent, err
}
