// Package effectdtype holds the types every layer of effectd shares: an intent
// as stored and shown (IntentRow) with its attempts, audit entries and
// provider events, a channel as operators see it, the stats, a reconcile's
// Settlement, a sweep's report, the bodies of bulk actions, and the storage
// mode decided at start-up. The
// dispatcher produces them, the admin API answers them as JSON, and the Go
// client and the console read them back, so each is declared once, here.
//
// Like River's rivertype, it holds types, not behaviour. Of effectd's packages
// it imports only the vocabulary they build on, which imports nothing of
// effectd in turn: statemachine (State, Delivery), policy (Policy) and
// providers/effect (a listed provider object).
package effectdtype
