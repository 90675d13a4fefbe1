package effectdtype

import (
	"encoding/json"
	"time"
)

// IntentRow is one row of effectd.intents, as the admin API shows it.
type IntentRow struct {
	ID             int64           `json:"id"`
	EventID        string          `json:"event_id"`
	Channel        string          `json:"channel"`
	Payload        json.RawMessage `json:"payload"`
	Status         State           `json:"status"`
	Attempts       int             `json:"attempts"`
	NextAttemptAt  time.Time       `json:"next_attempt_at"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at"`
	ClaimedAt      *time.Time      `json:"claimed_at"`
	IdempotencyKey string          `json:"idempotency_key"`
	ProviderRef    *string         `json:"provider_ref"`
	LastError      *string         `json:"last_error"`
	OrderingKey    *string         `json:"ordering_key"`
	OccurredAt     *time.Time      `json:"occurred_at"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	Delivery       *string         `json:"delivery"`        // a Delivery; null until known
	DeliveryDetail *string         `json:"delivery_detail"` // the provider's own status and error code
	DeliveryAt     *time.Time      `json:"delivery_at"`
	// Problems names each time in the row that Go and JSON cannot carry
	// (infinity, a year past 9999), shown clamped into range instead.
	Problems []string `json:"problems,omitempty"`
}

// IntentStatus is what a producer may read of its intent through
// effectd.status or dispatcher.Status: never its payload or error text, which
// may hold values its channel redacts.
type IntentStatus struct {
	Status         string     // PENDING, SENDING, IN_DOUBT, SENT, FAILED, SKIPPED, CANCELLED
	Attempts       int        // provider calls made
	ProviderRef    string     // the provider's reference; "" = none yet
	Delivery       string     // what the provider said after accepting it; "" = nothing yet
	LastErrorClass string     // the outcome of the last attempt that failed: retry, failed, in_doubt, maybe_sent…; "" = none
	NextAttemptAt  *time.Time // while PENDING: when it is next due
}

// IntentPage is one page of a list of intents.
type IntentPage struct {
	Intents []IntentRow `json:"intents"`
	Next    *int64      `json:"next"` // pass as ?after= for the next page; null on the last page
}

// Attempt is one row of effectd.attempts: a provider call, lookup, callback or
// operator action on an intent.
type Attempt struct {
	ID          int64      `json:"id"`
	Attempt     int        `json:"attempt"`
	Kind        string     `json:"kind"`
	StartedAt   time.Time  `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	Outcome     string     `json:"outcome"`
	Error       *string    `json:"error"`
	ProviderRef *string    `json:"provider_ref"`
}

// AuditEntry is one row of effectd.audit: a change made by an operator or the
// reconciler. Before and After are stored as written: in the shape of the
// audit writer's state (and after also why it changed), or as earlier
// versions wrote them.
type AuditEntry struct {
	ID     int64           `json:"id"`
	At     time.Time       `json:"at"`
	Actor  string          `json:"actor"`
	Action string          `json:"action"`
	Reason *string         `json:"reason"` // why, as the operator gave it
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// IntentDetail is one intent with its newest attempts and audit entries.
type IntentDetail struct {
	Intent   IntentRow    `json:"intent"`
	Attempts []Attempt    `json:"attempts"`
	Audit    []AuditEntry `json:"audit"`
	// Set when older attempts or audit entries exist than those shown.
	AttemptsTruncated bool `json:"attempts_truncated,omitempty"`
	AuditTruncated    bool `json:"audit_truncated,omitempty"`
	// TraceID is the producer's trace the intent was enqueued in, absent
	// without one (docs/tracing.md).
	TraceID string `json:"trace_id,omitempty"`
}

// IntentFilter selects a page of intents by id. A nil field does not filter.
type IntentFilter struct {
	After    int64 // ids above this one
	Limit    int64 // the most rows read
	Status   *string
	Channel  *string
	EventID  *string
	Delivery *string
	Search   *string    // an event id, idempotency key or provider reference, exactly
	Since    *time.Time // created at or after
	Until    *time.Time // created before
	Channels []string   // among these channels; nil: every channel
}
