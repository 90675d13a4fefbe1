// Package query is the base of effectd's data layer: what every statement
// runs on (DB, TxDB, RowQuerier) and what the statements of several concerns
// share: the one scan of a whole intent (ScanIntent, in the order of
// intent_columns.sql), the builder of statements whose conditions depend on
// the filters given (Stmt), timestamps read without failing (LooseTime),
// interval and NULL parameters, and the advisory locks.
//
// The statements live in one package per concern, each beside its embedded
// .sql files, each importing this package and no other concern:
//
//	intentdb     whole intents: enqueue and the producers' verbs, claim,
//	             complete, settle, operate, delivery changes and polls (with
//	             the attempts they record), bulk snapshots, bucket leases,
//	             the LISTEN/NOTIFY wake-up
//	attemptdb    attempts on their own: an intent's list, an operator's
//	             transition recorded as one
//	eventdb      provider events: record one, set its outcome
//	channeldb    channels, their policies and rate tokens
//	accessdb     who may act and what they did: console sessions, two-person
//	             approvals, the audit trail
//	retentiondb  partitions and dedupe keys, added and dropped by age
//	readdb       what operators and Prometheus read: single intents and
//	             lists, provider event lists, settled counts and gauges,
//	             rollups and charts, id marks, the sweep's reads and coverage
//	harnessdb    what the harnesses run, not serve: history loads, whole-table
//	             inventories for the chaos checker, table sizes
//	querytest    the EXPLAIN helpers the plan tests share
//
// No statement is exported. Callers run one through an exported function
// with typed parameters (a struct whose fields name them when they are many,
// e.g. ClaimParams, SettleParams, BulkFilter) and typed results:
// effectdtype's rows where they exist (IntentRow, Attempt, AuditEntry,
// ProviderEvent), otherwise a struct declared beside the function (Claimed,
// Unsettled, ChannelRow, ...). A missing row is pgx.ErrNoRows, a fenced-out
// compare-and-set a false "applied" or "moved". Each function takes the
// caller's DB: a pool, a connection or a transaction, so a change and its
// audit entry share one.
package query
