package accessdb

import (
	"context"
	_ "embed"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
)

//go:embed audit.sql
var auditSQL string

//go:embed list_audit.sql
var listAuditSQL string

// ListAudit reads the newest limit audit entries of intent id, oldest first.
func ListAudit(ctx context.Context, db query.DB, id int64, limit int) ([]effectdtype.AuditEntry, error) {
	rows, err := db.Query(ctx, listAuditSQL, id, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[effectdtype.AuditEntry])
}

// Audit is one entry of effectd.audit: who changed what, why, and the subject
// before and after the change. Every change made through the admin API (an
// intent's transition, alone or in a bulk action, an operator's reconcile, a
// channel's policy, pause or resume) is written by WriteAudit, so every entry
// has one shape.
type Audit struct {
	Actor    string // a token name
	Action   string // intent.<event>, intent.reconcile, channel.policy, channel.pause, channel.resume
	IntentID int64  // 0 for a channel's entry
	Channel  string
	Before   AuditState
	After    AuditState
	Reason   string // why, as the operator gave it; "" = not given
	Snapshot string // the bulk snapshot the change comes from; "" = none
	Force    bool   // sent again past the provider's key window on the operator's word
	Outcome  string // what an operator's reconcile found, e.g. "found → SENT"
	// Approval names the two-person approval request the change ran at;
	// Actor is then the approver, and Approval.RequestedBy the requester.
	Approval *AuditApproval
}

// AuditApproval is the approval request an audited change ran at, in the
// entry's after column: its id and who asked for it.
type AuditApproval struct {
	Request     int64  `json:"request"`
	RequestedBy string `json:"requested_by"`
	ApprovedBy  string `json:"approved_by"`
}

// AuditState is the subject of an audit entry as the entry records it: an
// intent or a channel. The before and after columns hold its fields, and
// after also the facts of the change (reason, snapshot, force, outcome).
type AuditState struct {
	*IntentState
	*ChannelState
}

// IntentState is what an audit entry records of an intent: not its payload,
// which may hold personal data.
type IntentState struct {
	Status        string    `json:"status"`
	Attempts      int       `json:"attempts"`
	ProviderRef   *string   `json:"provider_ref"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
}

// IntentAudit is what an audit entry records of r.
func IntentAudit(r effectdtype.IntentRow) AuditState {
	return AuditState{IntentState: &IntentState{Status: string(r.Status), Attempts: r.Attempts,
		ProviderRef: r.ProviderRef, NextAttemptAt: r.NextAttemptAt}}
}

// ChannelState is what an audit entry records of a channel.
type ChannelState struct {
	Paused         bool            `json:"paused"`
	Policy         json.RawMessage `json:"policy"`          // the effective policy
	PolicyOverride json.RawMessage `json:"policy_override"` // what the API changed; null: nothing
}

// auditAfter is the after column: the subject and why it changed.
type auditAfter struct {
	AuditState
	Reason   string         `json:"reason,omitempty"`
	Snapshot string         `json:"snapshot,omitempty"`
	Force    bool           `json:"force,omitempty"`
	Outcome  string         `json:"outcome,omitempty"`
	Approval *AuditApproval `json:"approval,omitempty"`
}

// WriteAudit writes e through db; run it in the transaction that makes the change.
func WriteAudit(ctx context.Context, db query.DB, e Audit) error {
	before, err := json.Marshal(e.Before)
	if err != nil {
		return err
	}
	after, err := json.Marshal(auditAfter{AuditState: e.After, Reason: e.Reason, Snapshot: e.Snapshot, Force: e.Force, Outcome: e.Outcome,
		Approval: e.Approval})
	if err != nil {
		return err
	}
	var intent *int64
	if e.IntentID != 0 {
		intent = &e.IntentID
	}
	_, err = db.Exec(ctx, auditSQL, e.Actor, e.Action, intent, e.Channel, before, after, e.Reason, e.Snapshot)
	return err
}
