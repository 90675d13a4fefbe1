// Package sandbox is a loopback emulator of the providers effectd calls: Stripe's
// paths (/v1/..., package stripesandbox), Twilio's (/2010-04-01/..., package
// twiliosandbox) and a webhook receiver (/hooks/{name}), on one port. It keeps
// the providers' idempotency semantics, injects faults on demand, and keeps a
// ledger of every call and every applied effect, served at GET
// /_sandbox/ledger, so tests can count effects per key. The ledger, the faults
// and the one shape of a provider's handlers live in internal/emu, shared by
// the providers; Server wires them together.
package sandbox
