package dispatcher

import "github.com/effectd/effectd/statemachine"

// Lookup outcomes, as counted in metrics and reported by Reconcile.
const (
	LookupFound     = "found"     // the provider has the effect: SENT
	LookupAbsent    = "absent"    // provably not applied: PENDING, sent again
	LookupAmbiguous = "ambiguous" // cannot tell: the channel's lookup_fallback decides
	ByPolicy        = "policy"    // no lookup: the channel's in_doubt policy decided
	// NotLookedUp is a dry run's answer where the lookup would repeat the call
	// with its key (Replayer): it was not called, since it could apply the
	// effect; a real reconcile looks up.
	NotLookedUp = "not_looked_up"
)

// Settlement is what the reconciler decided (or, on a dry run, would decide)
// for one in-doubt intent.
type Settlement struct {
	IntentID    int64              `json:"intent_id"`
	From        statemachine.State `json:"from"`
	To          statemachine.State `json:"to"`
	Outcome     string             `json:"outcome"` // found | absent | ambiguous | policy
	ProviderRef string             `json:"provider_ref,omitempty"`
	Applied     bool               `json:"applied"` // false on a dry run or when another actor won the race
	Error       string             `json:"error,omitempty"`
}
