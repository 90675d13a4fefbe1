package providertest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/effectd/effectd/providers/providertest"
	"github.com/effectd/effectd/providers/sandbox"
	"github.com/effectd/effectd/providers/webhook"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// ledgerLooker is a webhook provider with a Lookup that reads the sandbox's
// ledger over HTTP: enough to run the suite's lookup cases on a real provider.
type ledgerLooker struct {
	*webhook.Provider
	baseURL string
}

func (l ledgerLooker) Lookup(ctx context.Context, key string, _ json.RawMessage, _ map[string]string, _, _ time.Time) (string, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.baseURL+"/_sandbox/ledger?kind=webhook", nil)
	if err != nil {
		return "", false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", false, fmt.Errorf("lookup %s: %w", key, err)
	}
	defer resp.Body.Close()
	var snap sandbox.Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		return "", false, fmt.Errorf("lookup %s: %w", key, err)
	}
	for _, e := range snap.Effects {
		if e.Key == key {
			return e.Ref, true, nil
		}
	}
	return "", false, nil
}

func harness(keyed bool) providertest.Harness {
	return providertest.Harness{
		Kind:    "webhook",
		Keyed:   keyed,
		Sandbox: sandbox.Options{WebhookSecret: secret},
		New: func(t *testing.T, baseURL string) providertest.Provider {
			p, err := webhook.New(webhook.Config{URL: baseURL + "/hooks/any", Secret: secret})
			if err != nil {
				t.Fatal(err)
			}
			return ledgerLooker{p, baseURL}
		},
		Payload: func(i int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)) },
		// The ledger endpoint is not subject to faults, so this looker can always tell.
		Skip: map[string]string{"lookup_cannot_tell": "the sandbox ledger never fails"},
	}
}

// The suite's own cases, lookup ones included, on a provider with Lookup,
// both as keyed and as unkeyed (a dropped call settled by lookup).
func TestSuiteWithLooker(t *testing.T) {
	t.Parallel()
	for _, keyed := range []bool{true, false} {
		t.Run(fmt.Sprintf("keyed=%v", keyed), func(t *testing.T) {
			t.Parallel()
			h := harness(keyed)
			h.Cases = []providertest.Case{{Name: "extra_case_gets_env", Run: func(t *testing.T, e *providertest.Env) {
				if e.Sandbox == nil || e.URL == "" || e.Provider == nil || e.Harness.Kind != "webhook" {
					t.Fatalf("Env = %+v", e)
				}
				if _, err := e.Send(t, 3); err != nil {
					t.Fatal(err)
				}
				e.RequireEffects(t, 1)
			}}}
			providertest.Run(t, h)
		})
	}
}
