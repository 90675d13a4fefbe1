// Package query holds the SQL that effectd runs on its own tables: one
// statement per embedded .sql file, each opening with a comment that says what
// it does and what its parameters are. The dispatcher, the admin API and the
// console all take their SQL from here.
//
// A statement with a few parameters is an exported string (Operate,
// ChannelGet, ...), run with the caller's pgx pool, connection or transaction.
// A statement whose positional parameters would be easy to misorder is run
// through a typed function instead: Complete (a CompleteBatch of outcomes),
// Settle, RecordEvent, RecordPoll, ListIntents, ListEvents and FreezeBulk take
// a struct whose fields name each parameter.
//
// WriteAudit is the one writer of effectd.audit, and AuditState its one shape:
// before and after hold the subject's fields (an intent's status, attempts,
// provider_ref and next_attempt_at; a channel's paused, policy and
// policy_override), and after also why it changed (reason, snapshot, force,
// outcome).
package query
