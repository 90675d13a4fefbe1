package effectdtype

import (
	"encoding/json"
	"time"
)

// ApprovalState is where an approval request stands.
type ApprovalState string

// The states of an approval request: pending until a second person decides
// it or it expires; failed when it was approved but its action could not run
// (the intent or channel moved on since the request), nothing changed.
const (
	ApprovalPending  ApprovalState = "pending"
	ApprovalApproved ApprovalState = "approved"
	ApprovalRejected ApprovalState = "rejected"
	ApprovalExpired  ApprovalState = "expired"
	ApprovalFailed   ApprovalState = "failed"
)

// ApprovalRequest is an operator action on a two-person channel waiting for
// (or given) a second person's decision.
type ApprovalRequest struct {
	ID      int64  `json:"id"`
	Channel string `json:"channel"`
	// Action is what runs at approval: intent.resolve_sent,
	// intent.resolve_skip, intent.resolve_send, intent.requeue (forced past
	// the key window), bulk.apply or channel.policy.
	Action string `json:"action"`
	// The intent the requester was shown, as it was: its id and event id
	// (the fence), status, attempts and idempotency key. Nil for a bulk
	// action or a policy change.
	Intent *ApprovalTarget `json:"intent"`
	// Parameters of the action: provider_ref, force; snapshot and rows; the
	// policy patch and the override it was made against.
	Parameters     json.RawMessage `json:"parameters"`
	Reason         string          `json:"reason"`
	Requester      string          `json:"requester"`
	CreatedAt      time.Time       `json:"created_at"`
	ExpiresAt      time.Time       `json:"expires_at"`
	State          ApprovalState   `json:"state"`
	Decider        *string         `json:"decider"`
	DecisionReason *string         `json:"decision_reason"`
	DecidedAt      *time.Time      `json:"decided_at"`
	Outcome        *string         `json:"outcome"` // what the approved action did, or why it could not run
}

// ApprovalTarget is the intent an approval request acts on, as the requester saw it.
type ApprovalTarget struct {
	ID             int64  `json:"id"`
	EventID        string `json:"event_id"`
	Status         string `json:"status"`
	Attempts       int    `json:"attempts"`
	IdempotencyKey string `json:"idempotency_key"`
}

// ApprovalPage is a page of approval requests, oldest first.
type ApprovalPage struct {
	Requests []ApprovalRequest `json:"requests"`
	// Next is the id to pass as ?after= for the next page; 0 on the last.
	Next int64 `json:"next"`
}
