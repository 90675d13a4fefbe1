package twilio_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/providers/providertest"
	"github.com/effectd/effectd/providers/sandbox"
	"github.com/effectd/effectd/providers/twilio"
)

func TestContract(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Harness{
		Kind: "twilio",
		New: func(t *testing.T, baseURL string) providertest.Provider {
			p, err := twilio.New(twilio.Config{AccountSID: testAccount, AuthToken: "secret", From: testFrom, BaseURL: baseURL})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Payload: func(i int) json.RawMessage { return sms(testTo, fmt.Sprint("contract message ", i)) },
		Cases: []providertest.Case{
			{Name: "lookup_ambiguous", Run: func(t *testing.T, e *providertest.Env) {
				for range 2 { // no idempotency: the same message twice is two messages
					if _, err := e.Send(t, 1); err != nil {
						t.Fatalf("Send: %v", err)
					}
				}
				e.RequireEffects(t, 2)
				claimed := time.Now().Add(-time.Minute)
				_, found, err := e.Provider.(providertest.Looker).Lookup(t.Context(), e.Key(1), e.Harness.Payload(1), e.Meta(1), claimed, claimed)
				if !errors.Is(err, twilio.ErrAmbiguous) || found {
					t.Fatalf("Lookup = (%v, %v), want ErrAmbiguous", found, err)
				}
			}},
			{Name: "unsubscribed_is_permanent", Run: func(t *testing.T, e *providertest.Env) {
				_, err := e.Provider.Send(t.Context(), e.Key(1), sms(sandbox.TwilioUnsubscribedNumber, "hi"), e.Meta(1))
				if c := effect.Classify(err); err == nil || c != (effect.Class{}) {
					t.Fatalf("Send to an unsubscribed number: %v classified %+v, want permanent", err, c)
				}
				e.RequireEffects(t, 0)
			}},
		},
	})
}
