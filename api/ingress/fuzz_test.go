package ingress_test

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzIngress posts arbitrary bodies, signatures and channels to both
// routes: the answer is never a 5xx, and nothing unsigned reaches the recorder.
func FuzzIngress(f *testing.F) {
	f.Add("twilio", "sms", "MessageSid=SM1&MessageStatus=delivered", "sig", "effectd_intent_id=1")
	f.Add("twilio", "sms", "%zz&&==", "", "effectd_intent_id=-1")
	f.Add("stripe", "refund", `{"id":"evt_1","type":"refund.updated","data":{"object":{"object":"refund"}}}`, "t=1,v1=00", "")
	f.Add("stripe", "refund", `{"data":null}`, "t=abc", "")
	f.Add("stripe", "nope", "", "", "")
	f.Fuzz(func(t *testing.T, provider, channel, body, sig, query string) {
		srv, rec, _, _ := setup(t)
		target := srv.URL + "/ingress/" + provider + "/" + channel
		if query != "" {
			target += "?" + query
		}
		req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(body))
		if err != nil {
			return // not a URL: nothing to send
		}
		req.Header.Set("X-Twilio-Signature", sig)
		req.Header.Set("Stripe-Signature", sig)
		res, err := srv.Client().Do(req)
		if err != nil {
			return
		}
		res.Body.Close()
		if res.StatusCode >= 500 {
			t.Fatalf("%s %q: %d", target, body, res.StatusCode)
		}
		if n := len(rec.events()); n != 0 {
			t.Fatalf("%s %q with signature %q reached the recorder", target, body, sig)
		}
	})
}
