package effectdtype

import (
	"encoding/json"
	"time"
)

// ProviderEvent is one row of effectd.provider_events: an event a provider sent
// (a Twilio status callback, a Stripe event).
type ProviderEvent struct {
	ID         int64           `json:"id"`
	Provider   string          `json:"provider"`
	EventID    string          `json:"event_id"`
	Channel    string          `json:"channel"`
	IntentID   *int64          `json:"intent_id"` // null: an orphan
	ObjectRef  *string         `json:"object_ref"`
	Type       string          `json:"type"`
	Status     *string         `json:"status"`
	Delivery   *string         `json:"delivery"` // a Delivery
	Detail     *string         `json:"detail"`
	Outcome    string          `json:"outcome"`
	Payload    json.RawMessage `json:"payload"`
	ReceivedAt time.Time       `json:"received_at"`
}

// ProviderEventPage is one page of a list of provider events.
type ProviderEventPage struct {
	Events []ProviderEvent `json:"events"`
	Next   *int64          `json:"next"`
}

// EventFilter selects a page of provider events by id. A nil field does not
// filter.
type EventFilter struct {
	After       int64 // ids above this one
	Limit       int64 // the most rows read
	OrphansOnly bool
	Channel     *string
	IntentID    *int64
	Channels    []string // among these channels; nil: every channel
}
