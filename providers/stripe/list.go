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

// List's bounds: a window holding more than ListLimit objects of a type fails,
// asking for a shorter one; the whole listing, every page, gets ListTimeout
// (or the per-call timeout, when longer).
const (
	ListLimit   = 20000
	ListTimeout = 2 * time.Minute
)

// iter is what every stripe-go list iterator offers.
type iter interface {
	Next() bool
	Err() error
	Current() interface{}
}

// walk reads it, object by object, until visit returns false or the list ends.
func walk(it iter, visit func(o effect.Object, md map[string]string) bool) error {
	for it.Next() {
		if !visit(describe(it.Current())) {
			break
		}
	}
	return it.Err()
}

// describe reads a listed refund, payment intent or transfer.
func describe(v any) (effect.Object, map[string]string) {
	money := func(amount int64, currency stripeapi.Currency) string {
		return fmt.Sprintf("%d %s", amount, strings.ToLower(string(currency)))
	}
	var o effect.Object
	var md map[string]string
	var created int64
	switch x := v.(type) {
	case *stripeapi.Refund:
		o.Ref, o.Kind, md, created = x.ID, "refund", x.Metadata, x.Created
		o.Summary = "refund " + money(x.Amount, x.Currency)
	case *stripeapi.PaymentIntent:
		o.Ref, o.Kind, md, created = x.ID, "payment_intent", x.Metadata, x.Created
		o.Summary = "payment intent " + money(x.Amount, x.Currency) + ", " + string(x.Status)
	case *stripeapi.Transfer:
		o.Ref, o.Kind, md, created = x.ID, "transfer", x.Metadata, x.Created
		o.Summary = "transfer " + money(x.Amount, x.Currency)
		if x.Destination != nil {
			o.Summary += " to " + x.Destination.ID
		}
	}
	o.EventID, o.IntentID = md[effect.MetaEventID], md[effect.MetaIntentID]
	o.Created = time.Unix(created, 0).UTC()
	return o, md
}

// List returns the refunds, payment intents and transfers created in
// [since, until) that carry metadata effectd_event_id, from Stripe's list
// endpoints filtered by created, every page. Stripe's created times are whole
// seconds: the filter is [since rounded down, until rounded up).
func (p *Provider) List(ctx context.Context, since, until time.Time) ([]effect.Object, error) {
	ctx, x, cancel := p.tracedFor(ctx, max(p.timeout, ListTimeout))
	defer cancel()
	window := func() *stripeapi.RangeQueryParams {
		lt := until.Unix()
		if until.After(time.Unix(lt, 0)) {
			lt++
		}
		return &stripeapi.RangeQueryParams{GreaterThanOrEqual: since.Unix(), LesserThan: lt}
	}
	var out []effect.Object
	for _, kind := range []string{"refund", "payment_intent", "transfer"} {
		seen := 0
		keep := func(o effect.Object, md map[string]string) bool {
			seen++
			if o.EventID != "" {
				out = append(out, o)
			}
			return seen <= ListLimit
		}
		var err error
		switch kind {
		case "refund":
			lp := &stripeapi.RefundListParams{CreatedRange: window()}
			lp.Context, lp.Limit = ctx, stripeapi.Int64(100)
			err = walk(p.api.Refunds.List(lp), keep)
		case "payment_intent":
			lp := &stripeapi.PaymentIntentListParams{CreatedRange: window()}
			lp.Context, lp.Limit = ctx, stripeapi.Int64(100)
			err = walk(p.api.PaymentIntents.List(lp), keep)
		case "transfer":
			lp := &stripeapi.TransferListParams{CreatedRange: window()}
			lp.Context, lp.Limit = ctx, stripeapi.Int64(100)
			err = walk(p.api.Transfers.List(lp), keep)
		}
		op := "stripe list " + kind + "s"
		if err != nil {
			return nil, classify(op, err, x)
		}
		if seen > ListLimit {
			return nil, fmt.Errorf("%s: more than %d created between %s and %s: list a shorter window",
				op, ListLimit, since.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339))
		}
	}
	return out, nil
}

// Match reports that Stripe objects are matched by their metadata, and that
// List covers every payload's effect.
func (p *Provider) Match(json.RawMessage) (string, bool) { return "", true }

// Held returns the objects Stripe holds for one intent whatever their time:
// the object ref names (when it exists), and those its payload's parent
// lists that carry its metadata (stamped: the intent's event id, and its
// intent id where both are stamped). proven reports, when it finds none,
// that Stripe holds none: false where the listing stopped at its limit or
// went through the search API, which is eventually consistent.
func (p *Provider) Held(ctx context.Context, ref string, raw json.RawMessage, meta map[string]string, created time.Time) (objects []effect.Object, proven bool, err error) {
	pl, err := parsePayload(raw)
	if err != nil {
		return nil, false, fmt.Errorf("stripe held: %w", err)
	}
	op := "stripe held " + pl.Type
	ctx, x, cancel := p.traced(ctx)
	defer cancel()
	if ref != "" {
		o, found, err := p.retrieve(ctx, ref)
		if err != nil {
			return nil, false, classify(op+" "+ref, err, x)
		}
		if found {
			objects = append(objects, o)
		}
	}
	stamped, complete, consistent, err := p.stamped(ctx, pl, meta[effect.MetaEventID], created)
	if err != nil {
		return nil, false, classify(op+" by list", err, x)
	}
	for _, o := range stamped {
		if o.Ref != ref && (o.IntentID == "" || meta[effect.MetaIntentID] == "" || o.IntentID == meta[effect.MetaIntentID]) {
			objects = append(objects, o)
		}
	}
	return objects, complete && consistent, nil
}

// retrieve reads object ref (re_…, pi_…, tr_…); found is false when Stripe
// answers that it has no such object, or ref names no kind effectd makes.
func (p *Provider) retrieve(ctx context.Context, ref string) (o effect.Object, found bool, err error) {
	params := stripeapi.Params{Context: ctx}
	var obj any
	switch {
	case strings.HasPrefix(ref, "re_"):
		obj, err = p.api.Refunds.Get(ref, &stripeapi.RefundParams{Params: params})
	case strings.HasPrefix(ref, "pi_"):
		obj, err = p.api.PaymentIntents.Get(ref, &stripeapi.PaymentIntentParams{Params: params})
	case strings.HasPrefix(ref, "tr_"):
		obj, err = p.api.Transfers.Get(ref, &stripeapi.TransferParams{Params: params})
	default:
		return o, false, nil
	}
	var se *stripeapi.Error
	if errors.As(err, &se) && se.HTTPStatusCode == http.StatusNotFound {
		return o, false, nil
	}
	if err != nil {
		return o, false, err
	}
	o, _ = describe(obj)
	return o, true, nil
}
