// Package statemachine holds the lifecycle of an intent: its states, the events
// that move it, and the one table of allowed transitions, built on looplab/fsm.
//
// The table decides whether a transition is legal and where it leads; the
// database applies it as a fenced compare-and-set. Nothing here has side effects.
package statemachine
