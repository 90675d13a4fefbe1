package effectdtype

// ReconcileResult is what a reconcile decided (or, on a dry run, would
// decide) for one in-doubt intent.
type ReconcileResult struct {
	IntentID    int64  `json:"intent_id"`
	From        State  `json:"from"`
	To          State  `json:"to"`
	Outcome     string `json:"outcome"` // found | absent | ambiguous | policy | not_looked_up
	ProviderRef string `json:"provider_ref,omitempty"`
	Applied     bool   `json:"applied"` // false on a dry run or when another actor won the race
	Error       string `json:"error,omitempty"`
}
