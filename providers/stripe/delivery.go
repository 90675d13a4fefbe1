package stripe

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	stripeapi "github.com/stripe/stripe-go/v76"
)

// Deliveries an object's status maps to, as effectd stores them.
const (
	DeliveryAccepted    = "accepted"
	DeliveryDelivered   = "delivered"
	DeliveryUndelivered = "undelivered"
)

// Outcome is what a Stripe object (as an event or a retrieval shows it) says
// about the effect that created it.
type Outcome struct {
	Status   string // the object's status; "reversed" or "paid" for a transfer
	Delivery string // accepted | delivered | undelivered; "" when it says nothing
	Reversal bool   // the effect was undone after it had succeeded
	Detail   string // status and the provider's reason, e.g. "failed expired_or_canceled_card"
}

// OutcomeOf maps an object of kind refund, payment_intent or transfer, and the
// event type that carried it ("" for a retrieval), to an Outcome.
func OutcomeOf(kind string, obj map[string]any, eventType string) Outcome {
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	o := Outcome{Status: str(obj, "status")}
	switch kind {
	case "refund":
		switch o.Status {
		case "pending", "requires_action":
			o.Delivery = DeliveryAccepted
		case "succeeded":
			o.Delivery = DeliveryDelivered
		case "failed", "canceled":
			o.Delivery, o.Reversal = DeliveryUndelivered, true
		}
		o.Detail = join(o.Status, str(obj, "failure_reason"))
	case "payment_intent":
		switch o.Status {
		case "requires_payment_method", "requires_confirmation", "requires_action", "processing", "requires_capture":
			o.Delivery = DeliveryAccepted
		case "succeeded":
			o.Delivery = DeliveryDelivered
		case "canceled":
			o.Delivery = DeliveryUndelivered
		}
		code := ""
		if e, ok := obj["last_payment_error"].(map[string]any); ok {
			code = str(e, "code")
		}
		if eventType == "payment_intent.payment_failed" {
			o.Delivery = DeliveryUndelivered
		}
		o.Detail = join(o.Status, code)
	case "transfer":
		reversed, _ := obj["reversed"].(bool)
		amountReversed, _ := obj["amount_reversed"].(float64)
		switch {
		case reversed:
			o.Status, o.Delivery, o.Reversal = "reversed", DeliveryUndelivered, true
		case amountReversed > 0:
			o.Status, o.Delivery = "partially_reversed", DeliveryDelivered
		default:
			o.Status, o.Delivery = "paid", DeliveryDelivered
		}
		o.Detail = o.Status
	}
	return o
}

func join(parts ...string) string {
	out := parts[:0:0]
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, " ")
}

// Poll retrieves the object ref (re_…, pi_…, tr_…) and tells what it says of
// the effect that created it, as OutcomeOf maps it.
func (p *Provider) Poll(ctx context.Context, ref string) (status, delivery, detail string, reversal bool, err error) {
	var kind string
	get := func(ctx context.Context) (any, error) { return nil, nil }
	params := func(ctx context.Context) stripeapi.Params { return stripeapi.Params{Context: ctx} }
	switch {
	case strings.HasPrefix(ref, "re_"):
		kind = "refund"
		get = func(ctx context.Context) (any, error) {
			return p.api.Refunds.Get(ref, &stripeapi.RefundParams{Params: params(ctx)})
		}
	case strings.HasPrefix(ref, "pi_"):
		kind = "payment_intent"
		get = func(ctx context.Context) (any, error) {
			return p.api.PaymentIntents.Get(ref, &stripeapi.PaymentIntentParams{Params: params(ctx)})
		}
	case strings.HasPrefix(ref, "tr_"):
		kind = "transfer"
		get = func(ctx context.Context) (any, error) {
			return p.api.Transfers.Get(ref, &stripeapi.TransferParams{Params: params(ctx)})
		}
	default:
		return "", "", "", false, permanent("stripe poll", "reference %q is not a refund, payment intent or transfer", ref)
	}
	var obj any
	_, err = p.call(ctx, "stripe poll "+kind, func(ctx context.Context) (string, error) {
		var err error
		obj, err = get(ctx)
		return "", err
	})
	if err != nil {
		return "", "", "", false, err
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return "", "", "", false, fmt.Errorf("stripe poll %s: %w", ref, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return "", "", "", false, fmt.Errorf("stripe poll %s: %w", ref, err)
	}
	o := OutcomeOf(kind, m, "")
	return o.Status, o.Delivery, o.Detail, o.Reversal, nil
}
