package effectdtype

import "time"

// The kinds of finding a sweep reports.
const (
	FindingOrphan    = "orphan"    // a provider object carrying effectd's metadata (a Twilio message of the channel's sender) with no intent
	FindingDuplicate = "duplicate" // two or more provider objects for one intent
	FindingUnsettled = "unsettled" // a SENDING (lease expired), IN_DOUBT or FAILED intent whose effect the provider holds
	FindingMissing   = "missing"   // a SENT intent whose effect the provider holds under no reference or identity of it, whatever its time
	FindingUncertain = "uncertain" // a SENT intent whose effect the listing lacks and whose absence the sweep cannot prove
)

// FindingKinds lists every kind of finding.
var FindingKinds = []string{FindingOrphan, FindingDuplicate, FindingUnsettled, FindingMissing, FindingUncertain}

// Finding is one disagreement between the provider and the table. The sweep
// changes nothing: Operation says what an operator would do about it.
type Finding struct {
	Kind        string           `json:"kind"`
	IntentID    int64            `json:"intent_id,omitempty"`
	EventID     string           `json:"event_id,omitempty"`
	Status      State            `json:"status,omitempty"`
	ProviderRef string           `json:"provider_ref,omitempty"` // the table's reference
	Objects     []ProviderObject `json:"objects"`                // what the provider holds for it
	Operation   string           `json:"operation"`
}

// SweepReport is what a sweep found for a channel and a window.
type SweepReport struct {
	Channel  string    `json:"channel"`
	Provider string    `json:"provider"`
	Since    time.Time `json:"since"`
	Until    time.Time `json:"until"`
	// ListedSince and ListedUntil bound the provider listing: the window
	// widened for clock skew, and to the latest claim of its intents.
	ListedSince time.Time `json:"listed_since"`
	ListedUntil time.Time `json:"listed_until"`
	Intents     int       `json:"intents"` // intents created in the window
	Objects     int       `json:"objects"` // provider objects listed
	// Unlisted counts the window's SENT intents whose effect the listing
	// does not cover (a Twilio message from another sender): not judged.
	Unlisted int            `json:"unlisted"`
	Counts   map[string]int `json:"counts"` // findings by kind, every kind present
	Findings []Finding      `json:"findings"`
	// Scheduled is what the channel's scheduled sweeps have finished of
	// [Since, Until): the spans their windows cover and the gaps between.
	Scheduled SweepCoverage `json:"scheduled"`
}

// SweepWindow is a span of intents' creation times, [Since, Until).
type SweepWindow struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
}

// SweepCoverage is what a channel's scheduled sweeps covered of a span:
// Covered merges the windows they finished (overlapping or adjoining ones
// into one), Gaps is the rest of the span, each in time order.
type SweepCoverage struct {
	Covered []SweepWindow `json:"covered"`
	Gaps    []SweepWindow `json:"gaps"`
}
