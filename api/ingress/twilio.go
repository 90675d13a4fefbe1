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
// effectd_intent_id to it when it created the message.
func (h *handler) twilio(w http.ResponseWriter, r *http.Request) {
	c, ok := h.channel(w, r, "twilio")
	if !ok {
		return
	}
	b, ok := h.body(w, r, "twilio")
	if !ok {
		return
	}
	form, err := url.ParseQuery(string(b))
	if err != nil {
		h.badSignature(w, "twilio", c.Name, "the body is not a form: "+err.Error())
		return
	}
	sig := r.Header.Get("X-Twilio-Signature")
	if sig == "" {
		h.badSignature(w, "twilio", c.Name, "X-Twilio-Signature is missing")
		return
	}
	public, _ := url.Parse(c.StatusCallback) // checked by NewHandler
	public.RawQuery = r.URL.RawQuery
	params := make(map[string]string, len(form))
	for k, v := range form {
		params[k] = v[0]
	}
	validator := client.NewRequestValidator(c.TwilioAuthToken)
	if !validator.Validate(public.String(), params, sig) {
		h.badSignature(w, "twilio", c.Name, "X-Twilio-Signature does not match "+public.Redacted())
		return
	}
	sid, status := form.Get("MessageSid"), form.Get("MessageStatus")
	if sid == "" || status == "" {
		h.events.WithLabelValues("twilio", "malformed").Inc()
		reply(w, http.StatusBadRequest, errBody("malformed", "MessageSid and MessageStatus are required"))
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
		Provider:  "twilio",
		EventID:   sid + ":" + status,
		Channel:   c.Name,
		IntentID:  intentID(r.URL.Query().Get(effect.MetaIntentID)),
		ObjectRef: sid,
		Type:      status,
		Status:    status,
		Delivery:  statemachine.Delivery(twilio.Delivery(status)),
		Detail:    dispatcher.DetailOf(status, form.Get("ErrorCode")),
		Payload:   payload,
	})
}
