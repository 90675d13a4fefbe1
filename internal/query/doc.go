// Package query is effectd's data layer: the SQL it runs on its own tables,
// and the only code that reads a row by column position. Each statement is an
// embedded .sql file that opens with a comment saying what it does; no
// statement is exported. Callers run one through an exported function with
// typed parameters (a struct whose fields name them when they are many, e.g.
// ClaimParams, SettleParams, IntentFilter) and typed results: effectdtype's rows
// where they exist (IntentRow, Attempt, AuditEntry, ProviderEvent), otherwise
// a struct declared beside the function (Claimed, Unsettled, ChannelRow, ...).
// A missing row is pgx.ErrNoRows, a fenced-out compare-and-set a false
// "applied" or "moved". Each function takes the caller's DB: a pool, a
// connection or a transaction, so a change and its audit entry share one.
//
// The Go files are organised by table: intents.go (whole intents: select,
// list, operate, enqueue), intents_send.go (claim, complete, the reconciler's
// take and settle, prune), intents_delivery.go (provider events' and polls'
// changes of delivery), intents_sweep.go, attempts.go, audit.go, bulk.go
// (bulk_snapshots and bulk_rows), channels.go, counts.go (the settled counts
// and gauges), id_marks.go, provider_events.go, rate_tokens.go,
// sessions.go (console_sessions), partitions.go, sweep_coverage.go
// (sweep_windows); locks.go and wakeup.go hold
// the advisory locks and the LISTEN/NOTIFY wake-up. filter.go builds the
// statements of the lists whose conditions depend on the filters given.
// Three files serve the harnesses rather than serve: whole-table reads that
// check a run (inventory.go, for the chaos checker), history loads for the
// benches and tests (load.go), and table sizes (sizes.go).
//
// WriteAudit is the one writer of effectd.audit, and AuditState its one shape:
// before and after hold the subject's fields (an intent's status, attempts,
// provider_ref and next_attempt_at; a channel's paused, policy and
// policy_override), and after also why it changed (reason, snapshot, force,
// outcome).
package query
