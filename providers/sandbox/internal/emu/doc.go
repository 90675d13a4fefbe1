// Package emu holds what every emulated provider of the sandbox shares: the
// ledger of calls, effects and callbacks, the faults injected on demand, and
// the one shape of a provider's handlers, Host.Handle over a Route that
// returns a Reply.
package emu
