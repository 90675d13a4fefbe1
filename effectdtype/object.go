package effectdtype

import "time"

// ProviderObject is one effect a provider holds, as a listing for the
// reconciliation sweep reads it. providers/effect names it Object, the name
// providers list it by.
type ProviderObject struct {
	Ref      string    `json:"ref"`                 // the provider's id: re_…, pi_…, tr_…, SM…
	Kind     string    `json:"kind"`                // refund | payment_intent | transfer | message
	EventID  string    `json:"event_id,omitempty"`  // metadata MetaEventID; "" where the provider keeps none
	IntentID string    `json:"intent_id,omitempty"` // metadata MetaIntentID; "" where the provider keeps none
	Created  time.Time `json:"created"`
	// Match is, for a provider that keeps no metadata, what identifies the
	// effect among others of the same sender (a Twilio message's recipient and
	// body); a Lister's Match gives the same text for the intent's payload.
	// Never shown: it may hold redacted payload fields.
	Match   string `json:"-"`
	Summary string `json:"summary"` // for people: amount and currency, or a masked recipient
}
