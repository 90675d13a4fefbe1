package effectdtype

// ChannelGauges are one channel's gauges.
type ChannelGauges struct {
	Channel string
	Gauges
}

// Gauges are what operators watch of a channel besides its counts.
type Gauges struct {
	OldestPendingAge float64        `json:"oldest_pending_age_seconds"` // the wait of the oldest due PENDING intent
	SendingPastLease int64          `json:"sending_past_lease"`
	InDoubt          int64          `json:"in_doubt"`
	Deliveries       DeliveryCounts `json:"deliveries"` // SENT intents by what became of them, where known
}

// DeliveryCounts counts SENT intents by their known delivery
// (Accepted, Delivered, Undelivered).
type DeliveryCounts struct {
	Accepted    int64 `json:"accepted"`
	Delivered   int64 `json:"delivered"`
	Undelivered int64 `json:"undelivered"`
}

// ChannelStats is one channel's counts and gauges, or their totals.
type ChannelStats struct {
	Counts     map[State]int64 `json:"counts"`
	CountsKind string          `json:"counts_kind"` // CountsExact
	Gauges
}

// Stats is counts and gauges by channel, and their totals (the oldest age is
// the maximum over channels).
type Stats struct {
	Channels map[string]ChannelStats `json:"channels"`
	Totals   ChannelStats            `json:"totals"`
}
