package statemachine

import (
	"fmt"

	"github.com/effectd/effectd/effectdtype"
	"github.com/looplab/fsm"
)

// Delivery is what became of a SENT intent, declared in effectdtype with its
// deliveries.
type Delivery = effectdtype.Delivery

// The deliveries (effectdtype's).
const (
	Unknown     = effectdtype.Unknown
	Accepted    = effectdtype.Accepted
	Delivered   = effectdtype.Delivered
	Undelivered = effectdtype.Undelivered
)

// Deliveries lists every delivery, in order of progress.
var Deliveries = effectdtype.Deliveries

// DeliveryEvent moves an intent's delivery forward.
type DeliveryEvent string

// The delivery events.
const (
	Accept    DeliveryEvent = "accept"    // the provider reports the effect pending
	Deliver   DeliveryEvent = "deliver"   // the provider reports it delivered or succeeded
	Undeliver DeliveryEvent = "undeliver" // the provider reports it undelivered or failed
	Reverse   DeliveryEvent = "reverse"   // the provider reverses a delivered effect (a refund that fails, a reversed transfer)
)

// deliverySrc names the unknown delivery in looplab/fsm, which needs a non-empty state.
const deliveryNone = "none"

func dsrc(ds ...Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = dname(d)
	}
	return out
}

func dname(d Delivery) string {
	if d == Unknown {
		return deliveryNone
	}
	return string(d)
}

// DeliveryTable is the one table of delivery transitions. It only moves
// forward: accepted → delivered | undelivered, and delivered → undelivered only
// when the provider reverses it.
var DeliveryTable = fsm.Events{
	{Name: string(Accept), Src: dsrc(Unknown), Dst: string(Accepted)},
	{Name: string(Deliver), Src: dsrc(Unknown, Accepted), Dst: string(Delivered)},
	{Name: string(Undeliver), Src: dsrc(Unknown, Accepted), Dst: string(Undelivered)},
	{Name: string(Reverse), Src: dsrc(Delivered), Dst: string(Undelivered)},
}

// DeliveryEvents lists every delivery event in the table's order.
var DeliveryEvents = func() []DeliveryEvent {
	out := make([]DeliveryEvent, len(DeliveryTable))
	for i, e := range DeliveryTable {
		out[i] = DeliveryEvent(e.Name)
	}
	return out
}()

type dedge struct {
	from Delivery
	ev   DeliveryEvent
}

// dnext is DeliveryTable flattened; a test checks it against looplab/fsm.
var dnext = func() map[dedge]Delivery {
	m := make(map[dedge]Delivery)
	for _, e := range DeliveryTable {
		for _, s := range e.Src {
			from := Delivery(s)
			if s == deliveryNone {
				from = Unknown
			}
			m[dedge{from, DeliveryEvent(e.Name)}] = Delivery(e.Dst)
		}
	}
	return m
}()

// DeliveryError says which delivery event was refused from which delivery.
type DeliveryError struct {
	From  Delivery
	Event DeliveryEvent
}

func (e *DeliveryError) Error() string {
	return fmt.Sprintf("%s: delivery event %q from delivery %q", ErrTransition, e.Event, dname(e.From))
}

// Unwrap makes errors.Is(err, ErrTransition) true.
func (e *DeliveryError) Unwrap() error { return ErrTransition }

// NextDelivery returns the delivery that ev leads to from d, or a *DeliveryError.
func NextDelivery(d Delivery, ev DeliveryEvent) (Delivery, error) {
	if to, ok := dnext[dedge{d, ev}]; ok {
		return to, nil
	}
	return "", &DeliveryError{From: d, Event: ev}
}

// deliveryEventFor is the event that a provider's report of delivery to
// moves an intent with. reversal says the provider undid an effect it had
// completed (a refund that failed after succeeding); only a reversal may turn
// delivered into undelivered. ok is false for a report that moves nothing.
func deliveryEventFor(to Delivery, reversal bool) (ev DeliveryEvent, ok bool) {
	switch {
	case to == Accepted:
		return Accept, true
	case to == Delivered:
		return Deliver, true
	case to == Undelivered && reversal:
		return Reverse, true
	case to == Undelivered:
		return Undeliver, true
	}
	return "", false
}

// Report returns the delivery that a provider's report moves d to: the
// report's delivery when the table allows it, a reversal of delivered
// falling back to undeliver from an earlier delivery. changed is false when
// the report moves nothing (a repeat, an older status arriving late).
func Report(d, to Delivery, reversal bool) (next Delivery, changed bool) {
	ev, ok := deliveryEventFor(to, reversal)
	if !ok {
		return d, false
	}
	if ev == Reverse && d != Delivered {
		ev = Undeliver // the success was never seen: the failure still ends it
	}
	n, err := NextDelivery(d, ev)
	if err != nil {
		return d, false
	}
	return n, true
}
