package stripe

import "strings"

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
