package api

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/effectd/effectd/dispatcher"
)

// classified reports whether err maps to a 4xx in errorTable, never a 500.
func classified(err error) bool {
	return errors.Is(err, errMalformed) || errors.Is(err, dispatcher.ErrInvalid)
}

func FuzzParseResolve(f *testing.F) {
	for _, s := range []string{`{"as":"sent","provider_ref":"re_1"}`, `{"as":"resend"}`, `{"as":"skip","reason":"x"}`, `{"as":"sent"}`, `{"as":1}`, `{} {}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, req, err := parseResolve(body)
		if err != nil {
			if !classified(err) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if ev == "" || (req.As == "sent") != (req.ProviderRef != "") || len(req.Reason) > maxReason {
			t.Fatalf("accepted %q as %q %+v", body, ev, req)
		}
	})
}

func FuzzPolicyPatch(f *testing.F) {
	for _, s := range []string{`{"max_attempts":3}`, `{"backoff":{"base":"2s"}}`, `{"lease":"-1s"}`, `{"bogus":1}`, `{"max_attempts":"x"}`, `{"lease":null}`, `{"rate_per_second":1e400}`} {
		f.Add([]byte(s))
	}
	yaml := []byte(`{"max_attempts": 5, "lease": "20s"}`)
	override := []byte(`{"in_doubt": "manual"}`)
	f.Fuzz(func(t *testing.T, patch []byte) {
		out, err := applyPolicyPatch("twilio", yaml, override, patch)
		if err != nil {
			if !classified(err) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		// What is stored must read back as a valid policy.
		b, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		p, err := dispatcher.EffectivePolicy("twilio", yaml, b)
		if err != nil {
			t.Fatalf("stored override %s does not load: %v", b, err)
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("stored override %s is invalid: %v", b, err)
		}
	})
}
