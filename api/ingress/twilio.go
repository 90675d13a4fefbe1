package ingress

import (
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/twilio/twilio-go/client"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/providers/twilio"
	"github.com/effectd/effectd/statemachine"
)

// twilio handles POST /ingress/twilio/{channel}: a status callback. It is
// verified against the channel's status_callback URL as configured (the URL
// Twilio was given), with the query as received: effectd appended
// effectd_intent_id and effectd_event_id to it when it created the message
// (a message created before effectd appended the event id matches only the
// intent that already holds its sid: dispatcher.RecordEvent).
func (h *handler) twilio(w http.ResponseWriter, r *http.Request) {
	c, ok := h.channel(w, r, "twilio")
	if !ok {
		return
	}
	b, ok := h.body(w, r, c)
	if !ok {
		return
	}
	sig := r.Header.Get("X-Twilio-Signature")
	if sig == "" {
		h.badSignature(w, c, "X-Twilio-Signature is missing")
		return
	}
	// ParseQuery keeps the fields it could read: the signature is checked
	// over them, so that a signed body that is not wholly a form is told
	// apart from a forgery.
	form, formErr := url.ParseQuery(string(b))
	public, _ := url.Parse(c.StatusCallback) // checked by NewHandler
	public.RawQuery = r.URL.RawQuery
	params := make(map[string]string, len(form))
	for k, v := range form {
		params[k] = v[0]
	}
	validator := client.NewRequestValidator(c.TwilioAuthToken)
	if !validator.Validate(public.String(), params, sig) {
		h.badSignature(w, c, "X-Twilio-Signature does not match "+public.Redacted())
		return
	}
	if formErr != nil {
		h.malformed(w, c, "the body is not a form: "+formErr.Error())
		return
	}
	sid, status := form.Get("MessageSid"), form.Get("MessageStatus")
	if sid == "" || status == "" {
		h.malformed(w, c, "MessageSid and MessageStatus are required")
		return
	}
	// Keep what identifies the message and its status; never the body, which
	// Twilio does not send with status callbacks anyway, nor the numbers in full.
	kept := map[string]string{}
	for _, k := range []string{"MessageSid", "MessageStatus", "ErrorCode", "AccountSid", "MessagingServiceSid", "ApiVersion"} {
		if v := form.Get(k); v != "" {
			kept[k] = v
		}
	}
	payload, _ := json.Marshal(kept)
	h.record(w, r, dispatcher.ProviderEvent{
		Provider:      "twilio",
		EventID:       sid + ":" + status,
		Channel:       c.Name,
		IntentID:      intentID(r.URL.Query().Get(effect.MetaIntentID)),
		IntentEventID: r.URL.Query().Get(effect.MetaEventID),
		ObjectRef:     sid,
		Type:          status,
		Status:        status,
		Delivery:      statemachine.Delivery(twilio.Delivery(status)),
		Detail:        dispatcher.DetailOf(status, form.Get("ErrorCode")),
		Payload:       payload,
	})
}
