// Package operator is the client-facing service of effectd: what the admin
// API, the console and the command line call to act on intents and
// channels. operator.New(pool, store) returns a Service over the pool, with
// the store of the storage mode decided at start-up (dispatcher.Dispatcher's
// Store); each of its methods is one transaction (or one read) on the pool:
//
//   - Operate (operate.go) moves one intent: the state machine decides, a
//     fenced compare-and-set applies, an operator attempt and an audit entry
//     record it.
//   - PauseChannel, ResumeChannel and ChangePolicy (channels.go) change a
//     channel, audited; PreviewPolicy shows a change without making it.
//   - FreezeBulk and ApplyBulk (bulk.go, bulk_bucket.go) freeze a selection
//     in a snapshot and apply it row by row as Operate would.
//   - RequestOperation, RequestPolicyChange, RequestBulk and Decide
//     (approval.go, approval_actions.go) run two-person approval.
//   - ListIntents, IntentDetail, ListProviderEvents (intents.go),
//     ListChannels, GetChannel (channels.go), Stats, Gauges (stats.go) and
//     Charts (charts.go) read what operators see. The rows they return are
//     effectdtype's; no type of the data layer appears in a method's
//     signature.
//
// Sessions (sessions.go) keeps the console's login sessions.
//
// The engine is package dispatcher: enqueueing, claiming, calling,
// completing, reconciling and maintenance. Imports point one way, operator
// to dispatcher: the service reuses what the engine defines and the engine
// must not depend on who operates it. The service takes from the dispatcher
// the key window (KeyWindow, PastKeyWindow, KeyWindowError), the lease error
// a reconcile shares (LeaseError), the operator's trace span (OperatorSpan)
// and an intent's trace id; the dispatcher knows nothing of the service.
// The errors both return, ErrNotFound, ErrInvalid and OpError (the operation
// that failed, named "operator.Operate(7, requeue)" or
// "dispatcher.Reconcile(7)"), are declared once in effectdtype and named
// here and in the dispatcher by aliases.
package operator
