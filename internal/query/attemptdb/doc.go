// Package attemptdb holds the statements of effectd.attempts that stand
// alone: an intent's attempts read for its detail (ListAttempts) and an
// operator's transition recorded as an attempt (RecordOperatorAttempt). The
// dispatcher's own attempts (calls, lookups, callbacks, polls) are written by
// intentdb with the change they record (Complete, Settle, SettleByEvent,
// RecordPoll).
package attemptdb
