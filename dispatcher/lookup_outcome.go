package dispatcher

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
