// Package accessdb holds who may act and what they did: console sessions
// (sessions.go), two-person approval requests (approvals.go) and the audit
// trail (audit.go). WriteAudit is the one writer of effectd.audit, and
// AuditState its one shape: before and after hold the subject's fields (an
// intent's status, attempts, provider_ref and next_attempt_at; a channel's
// paused, policy and policy_override), and after also why it changed (reason,
// snapshot, force, outcome).
package accessdb
