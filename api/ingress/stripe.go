package ingress

import (
	"encoding/json"
	"net/http"

	stripeapi "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/providers/stripe"
	"github.com/effectd/effectd/statemachine"
)

// stripe handles POST /ingress/stripe/{channel}: one Stripe event. The
// signature is checked first (webhook.ValidatePayload), then the body is
// decoded: a validly signed body that is not an event is malformed, not
// bad_signature.
//
// stripe-go's ConstructEvent refuses events rendered for an API version other
// than its own. effectd reads only fields every recent version carries (id,
// type, data.object's id, object, status, metadata, failure_reason, reversed,
// amount_reversed, last_payment_error.code), so it decodes the event itself,
// accepts other versions, counts them as api_version_mismatch and warns once
// per version.
func (h *handler) stripe(w http.ResponseWriter, r *http.Request) {
	c, ok := h.channel(w, r, "stripe")
	if !ok {
		return
	}
	b, ok := h.body(w, r, c)
	if !ok {
		return
	}
	if err := webhook.ValidatePayload(b, r.Header.Get("Stripe-Signature"), c.StripeSecret); err != nil {
		h.badSignature(w, c, err.Error())
		return
	}
	// Signed by Stripe, yet perhaps not an event: told apart from a forgery.
	var evt stripeapi.Event
	if err := json.Unmarshal(b, &evt); err != nil {
		h.malformed(w, c, "the body is not a Stripe event: "+err.Error())
		return
	}
	if evt.ID == "" || evt.Type == "" || evt.Data == nil || evt.Data.Object == nil {
		h.malformed(w, c, "the event has no id, type or data.object")
		return
	}
	if evt.APIVersion != stripeapi.APIVersion {
		h.events.WithLabelValues("stripe", "api_version_mismatch").Inc()
		if _, seen := h.versions.LoadOrStore(evt.APIVersion, true); !seen {
			h.log.Warn("ingress: Stripe event of another API version accepted; pin the endpoint to this version to match",
				"channel", c.Name, "event_api_version", evt.APIVersion, "effectd_api_version", stripeapi.APIVersion)
		}
	}
	obj := evt.Data.Object
	kind, _ := obj["object"].(string)
	ref, _ := obj["id"].(string)
	var id int64
	var eventID string
	if meta, ok := obj["metadata"].(map[string]any); ok {
		s, _ := meta[effect.MetaIntentID].(string)
		id = intentID(s)
		eventID, _ = meta[effect.MetaEventID].(string)
	}
	out := stripe.OutcomeOf(kind, obj, string(evt.Type))
	h.record(w, r, dispatcher.ProviderEvent{
		Provider:      "stripe",
		EventID:       evt.ID,
		Channel:       c.Name,
		IntentID:      id,
		IntentEventID: eventID,
		ObjectRef:     ref,
		Type:          string(evt.Type),
		Status:        out.Status,
		Delivery:      statemachine.Delivery(out.Delivery),
		Reversal:      out.Reversal,
		Detail:        out.Detail,
		Payload:       b,
	})
}
