package effectdtype

import (
	"encoding/json"
	"time"
)

// Channel is a channel as operators see it: its effective policy, the layers
// it comes from, whether it is paused, and its intents by status.
type Channel struct {
	Name           string          `json:"name"`
	Provider       string          `json:"provider"`
	Paused         bool            `json:"paused"`
	Policy         Policy          `json:"policy"`          // effective: defaults ← YAML ← override
	PolicyYAML     json.RawMessage `json:"policy_yaml"`     // what the YAML set
	PolicyOverride json.RawMessage `json:"policy_override"` // what an operator changed
	Counts         map[State]int64 `json:"counts"`          // intents by status
	CountsKind     string          `json:"counts_kind"`     // CountsExact
	UpdatedAt      time.Time       `json:"updated_at"`
}

// CountsExact is what every count of intents by status is (counts_kind), on
// one node and in the distributed mode (Citus) alike: exact, and read without
// reading history: live states from their partial indexes, settled states
// from the counts kept as changes happen.
const CountsExact = "exact"

// Redaction is the payload fields a channel masks for those who may not read
// them.
type Redaction struct {
	Channel string
	Fields  []string
}
