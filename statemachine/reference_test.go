package statemachine

import (
	"context"

	"github.com/looplab/fsm"
)

// Apply runs ev through a looplab/fsm machine over Table starting in s and
// returns the new state: the slow, reference form of Next that the tests
// check it against.
func Apply(ctx context.Context, s State, ev Event) (State, error) {
	m := fsm.NewFSM(string(s), Table, nil)
	if err := m.Event(ctx, string(ev)); err != nil {
		return "", &TransitionError{From: s, Event: ev}
	}
	return State(m.Current()), nil
}

// ApplyDelivery runs ev through a looplab/fsm machine over DeliveryTable
// starting in d: the slow, reference form of NextDelivery.
func ApplyDelivery(ctx context.Context, d Delivery, ev DeliveryEvent) (Delivery, error) {
	m := fsm.NewFSM(dname(d), DeliveryTable, nil)
	if err := m.Event(ctx, string(ev)); err != nil {
		return "", &DeliveryError{From: d, Event: ev}
	}
	return Delivery(m.Current()), nil
}
