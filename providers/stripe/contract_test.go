package stripe

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/effectd/effectd/providers/providertest"
)

func TestContract(t *testing.T) {
	providertest.Run(t, providertest.Harness{
		Kind:  "stripe",
		Keyed: true,
		New: func(t *testing.T, baseURL string) providertest.Provider {
			// No keep-alive: net/http resends an Idempotency-Key request
			// on its own when a reused connection dies, hiding drops.
			hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			p, err := New(Config{APIKey: "sk_test_contract", BaseURL: baseURL, HTTPClient: hc, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Payload: func(i int) json.RawMessage {
			return json.RawMessage(fmt.Sprintf(`{"type":"refund","payment_intent":"pi_%d","amount":%d}`, i, 100+i))
		},
		Skip: map[string]string{
			"server_error": "Stripe saves a 500 as the key's first response and replays it to the same key, so a resend " +
				"after the fault clears gets the 500 again (TestLookupReplayOfSavedError covers this)",
			"lookup_absent": "within the key window Stripe's lookup repeats the call, which sends an unsent effect; " +
				"absence is proven only past the window (TestLookupPastWindow)",
		},
	})
}
