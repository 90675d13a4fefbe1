package stripe

import "testing"

func TestOutcomeOf(t *testing.T) {
	cases := []struct {
		kind, event string
		obj         map[string]any
		want        Outcome
	}{
		{"refund", "refund.created", map[string]any{"status": "pending"}, Outcome{"pending", DeliveryAccepted, false, "pending"}},
		{"refund", "refund.created", map[string]any{"status": "succeeded"}, Outcome{"succeeded", DeliveryDelivered, false, "succeeded"}},
		{"refund", "refund.updated", map[string]any{"status": "failed", "failure_reason": "expired_or_canceled_card"},
			Outcome{"failed", DeliveryUndelivered, true, "failed expired_or_canceled_card"}},
		{"refund", "refund.updated", map[string]any{"status": "canceled"}, Outcome{"canceled", DeliveryUndelivered, true, "canceled"}},
		{"payment_intent", "payment_intent.created", map[string]any{"status": "requires_payment_method"}, Outcome{"requires_payment_method", DeliveryAccepted, false, "requires_payment_method"}},
		{"payment_intent", "payment_intent.processing", map[string]any{"status": "processing"}, Outcome{"processing", DeliveryAccepted, false, "processing"}},
		{"payment_intent", "payment_intent.succeeded", map[string]any{"status": "succeeded"}, Outcome{"succeeded", DeliveryDelivered, false, "succeeded"}},
		{"payment_intent", "payment_intent.payment_failed", map[string]any{"status": "requires_payment_method", "last_payment_error": map[string]any{"code": "card_declined"}},
			Outcome{"requires_payment_method", DeliveryUndelivered, false, "requires_payment_method card_declined"}},
		{"payment_intent", "payment_intent.canceled", map[string]any{"status": "canceled"}, Outcome{"canceled", DeliveryUndelivered, false, "canceled"}},
		{"transfer", "transfer.created", map[string]any{"reversed": false, "amount_reversed": 0.0}, Outcome{"paid", DeliveryDelivered, false, "paid"}},
		{"transfer", "transfer.updated", map[string]any{"reversed": false, "amount_reversed": 100.0}, Outcome{"partially_reversed", DeliveryDelivered, false, "partially_reversed"}},
		{"transfer", "transfer.reversed", map[string]any{"reversed": true, "amount_reversed": 500.0}, Outcome{"reversed", DeliveryUndelivered, true, "reversed"}},
		{"charge", "charge.refunded", map[string]any{"status": "succeeded"}, Outcome{"succeeded", "", false, ""}},
		{"refund", "", map[string]any{"status": "mystery"}, Outcome{"mystery", "", false, "mystery"}},
	}
	for _, c := range cases {
		if got := OutcomeOf(c.kind, c.obj, c.event); got != c.want {
			t.Errorf("OutcomeOf(%s, %v, %s) = %+v, want %+v", c.kind, c.obj, c.event, got, c.want)
		}
	}
}
