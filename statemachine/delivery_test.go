package statemachine

import (
	"context"
	"errors"
	"testing"
)

// TestDeliveryEveryPair checks NextDelivery against looplab/fsm for every
// (delivery, event) pair, and names every allowed pair.
func TestDeliveryEveryPair(t *testing.T) {
	ctx := context.Background()
	want := map[dedge]Delivery{
		{Unknown, Accept}:     Accepted,
		{Unknown, Deliver}:    Delivered,
		{Unknown, Undeliver}:  Undelivered,
		{Accepted, Deliver}:   Delivered,
		{Accepted, Undeliver}: Undelivered,
		{Delivered, Reverse}:  Undelivered,
	}
	for _, d := range Deliveries {
		for _, ev := range DeliveryEvents {
			got, err := NextDelivery(d, ev)
			ref, ferr := ApplyDelivery(ctx, d, ev)
			if (err == nil) != (ferr == nil) || got != ref {
				t.Fatalf("NextDelivery(%q, %s) = %q, %v; fsm says %q, %v", d, ev, got, err, ref, ferr)
			}
			w, allowed := want[dedge{d, ev}]
			switch {
			case allowed && (err != nil || got != w):
				t.Errorf("NextDelivery(%q, %s) = %q, %v; want %q", d, ev, got, err, w)
			case !allowed && err == nil:
				t.Errorf("NextDelivery(%q, %s) = %q; want refused", d, ev, got)
			case !allowed && !errors.Is(err, ErrTransition):
				t.Errorf("NextDelivery(%q, %s) error %v does not wrap ErrTransition", d, ev, err)
			}
		}
	}
}

// TestDeliveryReport checks the reports the ingress and polling apply: only
// forward, never back, a reversal only from delivered.
func TestDeliveryReport(t *testing.T) {
	cases := []struct {
		from, to Delivery
		reversal bool
		want     Delivery
		changed  bool
	}{
		{Unknown, Accepted, false, Accepted, true},
		{Accepted, Delivered, false, Delivered, true},
		{Accepted, Undelivered, false, Undelivered, true},
		{Delivered, Undelivered, true, Undelivered, true},   // a refund fails after succeeding
		{Accepted, Undelivered, true, Undelivered, true},    // its success was never seen
		{Delivered, Undelivered, false, Delivered, false},   // an SMS is never undelivered after delivered
		{Delivered, Accepted, false, Delivered, false},      // a late "sent" callback
		{Undelivered, Delivered, false, Undelivered, false}, // never back
		{Undelivered, Accepted, false, Undelivered, false},
		{Accepted, Accepted, false, Accepted, false}, // a repeat
		{Delivered, Delivered, false, Delivered, false},
		{Accepted, Unknown, false, Accepted, false}, // a status that says nothing
	}
	for _, c := range cases {
		got, changed := Report(c.from, c.to, c.reversal)
		if got != c.want || changed != c.changed {
			t.Errorf("Report(%q, %q, reversal=%v) = %q, %v; want %q, %v", c.from, c.to, c.reversal, got, changed, c.want, c.changed)
		}
	}
}
