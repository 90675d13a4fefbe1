// Package effectdtype holds the types every layer of effectd shares: an intent
// as stored and shown (IntentRow) with its states and deliveries (State,
// Delivery), what its producer may read of it (IntentStatus), its attempts,
// audit entries and provider events, a channel as operators see it with its
// Policy (and the policy's defaults, checks and retry delay), the stats, a
// reconcile's ReconcileResult, a sweep's report and the provider objects it
// lists, the bodies of bulk actions, and the storage mode
// decided at start-up. The dispatcher produces them, the admin API answers
// them as JSON, and the Go client and the console read them back, so each is
// declared once, here.
//
// Like River's rivertype, it is a leaf: it imports only the standard library
// (internal/layout's TestSharedTypesImportOnlyTheStandardLibrary checks it),
// so that any package may use it without pulling in another. Behaviour that
// needs a library stays where it was, and names these types by aliases:
// statemachine keeps the transition tables (looplab/fsm) and says
// statemachine.Pending for effectdtype.Pending; policy keeps the layering
// (Effective, Patch with json-patch, Explain); providers/effect calls a
// ProviderObject Object. Duration and PollDelays read YAML through the form of
// yaml.v3's Unmarshaler that takes a decoding function, which needs no import.
package effectdtype
