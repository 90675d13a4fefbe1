package effectdtype

import "time"

// BulkRequest asks for a bulk action's snapshot: the intents Filter selects,
// frozen, to be changed by Action when the snapshot is applied.
type BulkRequest struct {
	Action string     `json:"action"` // retry | cancel | resolve
	Filter BulkFilter `json:"filter"`
	As     string     `json:"as,omitempty"` // with resolve: resend | skip
	Reason string     `json:"reason"`       // required: why, kept in each audit entry
}

// BulkFilter selects the intents of a bulk action; empty fields select everything.
type BulkFilter struct {
	Status        string `json:"status,omitempty"`
	Channel       string `json:"channel,omitempty"`
	EventIDPrefix string `json:"event_id_prefix,omitempty"`
}

// BulkSnapshot is a frozen selection, not yet applied.
type BulkSnapshot struct {
	Snapshot  string      `json:"snapshot"`
	Matched   int         `json:"matched"`
	More      bool        `json:"more"` // more than the limit matched: only the first (by id) were frozen
	ExpiresAt time.Time   `json:"expires_at"`
	Sample    []IntentRow `json:"sample"`
}

// BulkResult is what applying a snapshot did.
type BulkResult struct {
	Applied int `json:"applied"`
	Skipped int `json:"skipped"` // changed since the snapshot, or gone
}
