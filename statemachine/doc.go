// Package statemachine holds the lifecycle of an intent: the events that move
// it between its states, and the one table of allowed transitions (Table, in
// looplab/fsm's form), with the same for what became of a sent effect
// (DeliveryTable). The states and deliveries themselves are declared in
// effectdtype, the leaf of shared types, and named here too by aliases
// (statemachine.Pending is effectdtype.Pending). Next and
// NextDelivery read the tables; the tests check them against looplab/fsm running
// the same tables, and Sources lists where an event may start.
//
// The table decides whether a transition is legal and where it leads; the
// database applies it as a fenced compare-and-set. Nothing here has side effects.
package statemachine
