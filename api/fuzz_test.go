package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/policy"
)

// classified reports whether err maps to a 4xx in errorTable, never a 500.
func classified(err error) bool {
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			return e.status < 500
		}
	}
	return false
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
		if ev == "" || (req.As == "sent") != (req.ProviderRef != "") || len(req.Reason) > operator.MaxReason {
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
		// As PATCH /v1/channels/{name}/policy takes it: the body's checks, then the merge.
		err := checkPolicyPatch(patch)
		var out map[string]json.RawMessage
		if err == nil {
			out, err = operator.MergePolicy("twilio", yaml, override, patch)
		}
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
		p, err := policy.Effective("twilio", yaml, b)
		if err != nil {
			t.Fatalf("stored override %s does not load: %v", b, err)
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("stored override %s is invalid: %v", b, err)
		}
	})
}

// FuzzDecodeBody: every admin request body goes through decodeObject. A body
// holding a string PostgreSQL cannot store (a \u0000 escape, an unpaired
// surrogate, bytes that are not UTF-8) is malformed, never accepted; what is
// accepted holds only storable strings, as sent: nothing silently replaced.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		`{"reason":"a\u0000b"}`, `{"reason":"\ud800"}`, `{"reason":"\udc00\ud800"}`, `{"reason":"\ud83d\ude00"}`,
		`{"reason":"\\u0000"}`, "{\"reason\":\"\xff\"}", `{"a\u0000":1}`, `{"filter":{"channel":["x",{"y":"\u0000"}]}}`,
		`{"reason":"\u00e9\uFFFD"}`, `{"as":"sent","provider_ref":"re_1"}`, `{"reason":"\"\u0000"}`, `{"x":"\\\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v map[string]any
		err := decodeObject(body, &v)
		if err != nil {
			if !classified(err) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		// Accepted: every string is storable and was sent as it reads, so a
		// U+FFFD in the result must come from the body itself.
		var walk func(x any)
		walk = func(x any) {
			switch x := x.(type) {
			case string:
				if !validText(x) {
					t.Fatalf("accepted %q holding %q", body, x)
				}
				if strings.ContainsRune(x, utf8.RuneError) && !bytes.Contains(body, []byte("\uFFFD")) && !bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`)) {
					t.Fatalf("accepted %q, silently replacing part of %q", body, x)
				}
			case map[string]any:
				for k, y := range x {
					walk(k)
					walk(y)
				}
			case []any:
				for _, y := range x {
					walk(y)
				}
			}
		}
		walk(v)
	})
}
