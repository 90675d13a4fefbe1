package statemachine

import (
	"errors"
	"fmt"

	"github.com/effectd/effectd/effectdtype"
	"github.com/looplab/fsm"
)

// State is the status of an intent, declared in effectdtype with its states.
type State = effectdtype.State

// The states of an intent (effectdtype's).
const (
	Pending   = effectdtype.Pending
	Sending   = effectdtype.Sending
	Sent      = effectdtype.Sent
	Failed    = effectdtype.Failed
	InDoubt   = effectdtype.InDoubt
	Skipped   = effectdtype.Skipped
	Cancelled = effectdtype.Cancelled
)

// States lists every state, in lifecycle order.
var States = effectdtype.States

// Event moves an intent from one state to another.
type Event string

// The events. Dispatcher events come first, then reconciler, ingress and operator events.
const (
	Claim   Event = "claim"   // a worker takes a due intent under a lease
	Succeed Event = "succeed" // the provider applied the effect
	Retry   Event = "retry"   // a retryable error: back to PENDING with backoff
	Fail    Event = "fail"    // a permanent error or the last attempt failed
	Expire  Event = "expire"  // max_age passed before the intent was sent

	Found   Event = "found"   // a lookup found the effect at the provider
	Absent  Event = "absent"  // a lookup proved the effect absent, or policy says resend
	Abandon Event = "abandon" // policy says skip an in-doubt call
	Doubt   Event = "doubt"   // nothing could settle the call: hand to an operator

	Callback Event = "callback" // a provider event shows the call took effect

	Requeue     Event = "requeue"      // operator: try again
	Cancel      Event = "cancel"       // operator: never send
	ResolveSent Event = "resolve_sent" // operator: the effect happened, with this reference
	ResolveSend Event = "resolve_send" // operator: send it again
	ResolveSkip Event = "resolve_skip" // operator: do not send it
)

func src(states ...State) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}

// Table is the one table of allowed transitions.
var Table = fsm.Events{
	{Name: string(Claim), Src: src(Pending), Dst: string(Sending)},
	{Name: string(Succeed), Src: src(Sending), Dst: string(Sent)},
	{Name: string(Retry), Src: src(Sending), Dst: string(Pending)},
	{Name: string(Fail), Src: src(Sending), Dst: string(Failed)},
	{Name: string(Expire), Src: src(Pending, Sending), Dst: string(Skipped)},

	{Name: string(Found), Src: src(Sending, InDoubt), Dst: string(Sent)},
	{Name: string(Absent), Src: src(Sending, InDoubt), Dst: string(Pending)},
	{Name: string(Abandon), Src: src(Sending), Dst: string(Skipped)},
	{Name: string(Doubt), Src: src(Sending), Dst: string(InDoubt)},

	{Name: string(Callback), Src: src(Sending, InDoubt), Dst: string(Sent)},

	{Name: string(Requeue), Src: src(Failed, Skipped, InDoubt), Dst: string(Pending)},
	{Name: string(Cancel), Src: src(Pending), Dst: string(Cancelled)},
	{Name: string(ResolveSent), Src: src(InDoubt, Sending), Dst: string(Sent)},
	{Name: string(ResolveSend), Src: src(InDoubt, Sending), Dst: string(Pending)},
	{Name: string(ResolveSkip), Src: src(InDoubt, Sending), Dst: string(Skipped)},
}

// Events lists every event in the table's order.
var Events = func() []Event {
	out := make([]Event, len(Table))
	for i, e := range Table {
		out[i] = Event(e.Name)
	}
	return out
}()

type edge struct {
	from State
	ev   Event
}

// next is Table flattened for the hot path, so that deciding a transition
// allocates nothing. A test checks it against looplab/fsm for every pair.
var next = func() map[edge]State {
	m := make(map[edge]State)
	for _, e := range Table {
		for _, s := range e.Src {
			m[edge{State(s), Event(e.Name)}] = State(e.Dst)
		}
	}
	return m
}()

// ErrTransition is returned when an event is not allowed from a state.
var ErrTransition = errors.New("transition not allowed")

// TransitionError says which event was refused from which state.
type TransitionError struct {
	From  State
	Event Event
}

// Error says, in the words the API and the audit use, what the intent is and
// which states the event applies to.
func (e *TransitionError) Error() string {
	from := Sources(e.Event)
	if len(from) == 0 {
		return fmt.Sprintf("%s: %q is not an event", ErrTransition, e.Event)
	}
	list := string(from[0])
	for i, s := range from[1:] {
		if i == len(from)-2 {
			list += " or " + string(s)
		} else {
			list += ", " + string(s)
		}
	}
	return fmt.Sprintf("%s: the intent is %s, and %s applies only to %s", ErrTransition, e.From, e.Event, list)
}

// Unwrap makes errors.Is(err, ErrTransition) true.
func (e *TransitionError) Unwrap() error { return ErrTransition }

// Next returns the state that ev leads to from s, or a *TransitionError.
func Next(s State, ev Event) (State, error) {
	if dst, ok := next[edge{s, ev}]; ok {
		return dst, nil
	}
	return "", &TransitionError{From: s, Event: ev}
}

// Sources returns the states from which ev is allowed.
func Sources(ev Event) []State {
	for _, e := range Table {
		if Event(e.Name) == ev {
			out := make([]State, len(e.Src))
			for i, s := range e.Src {
				out[i] = State(s)
			}
			return out
		}
	}
	return nil
}
