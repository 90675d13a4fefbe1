// Package stripe sends refunds, payment intents and transfers through Stripe
// with the intent's idempotency key, classifies Stripe's errors by behaviour,
// and settles in-doubt calls by key replay or by listing what was stamped.
//
// Of effectd's packages it imports only the shared providers/effect (meta
// names, error classes, Retry-After) and providers/fieldrule; it satisfies
// the dispatcher's Provider, Looker and Keyed interfaces by method signature.
package stripe
