// Package eventdb holds the writes of effectd.provider_events: a provider's
// event recorded once per provider (RecordEvent) and the outcome it had
// (SetEventOutcome). The changes an event makes to its intent are intentdb's;
// the list of events is readdb's.
package eventdb
