package policy_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/policy"
)

// TestDefault: a channel whose YAML says nothing runs with the named
// defaults; a webhook resends what is in doubt, the others look it up.
func TestDefault(t *testing.T) {
	t.Parallel()
	want := policy.Policy{
		MaxAttempts:    8,
		Backoff:        policy.Backoff{Base: policy.Duration(time.Second), Max: policy.Duration(10 * time.Minute)},
		Lease:          policy.Duration(30 * time.Second),
		InDoubt:        "lookup",
		LookupFallback: "manual",
		Concurrency:    16,
		Retention:      policy.Duration(360 * time.Hour),

		Approval:              "none",
		ApprovalBulkThreshold: 100,
		ApprovalExpiry:        policy.Duration(24 * time.Hour),
	}
	for _, kind := range []string{"stripe", "twilio", ""} {
		if got := policy.Default(kind); got != want {
			t.Errorf("Default(%q) = %+v, want %+v", kind, got, want)
		}
	}
	hook := want
	hook.InDoubt = "resend"
	if got := policy.Default("webhook"); got != hook {
		t.Errorf("Default(webhook) = %+v, want %+v", got, hook)
	}
	for _, kind := range []string{"stripe", "twilio", "webhook"} {
		if err := policy.Default(kind).Validate(); err != nil {
			t.Errorf("Default(%q) is invalid: %v", kind, err)
		}
	}
}

// TestValidateNamesField: each refused value is an *Error naming its field.
func TestValidateNamesField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		field, msg string
		change     func(*policy.Policy)
	}{
		{"policy.max_attempts", "must be at least 1, got 0", func(p *policy.Policy) { p.MaxAttempts = 0 }},
		{"policy.backoff.base", "must be positive", func(p *policy.Policy) { p.Backoff.Base = 0 }},
		{"policy.backoff.max", "must be at least backoff.base", func(p *policy.Policy) { p.Backoff.Max = p.Backoff.Base - 1 }},
		{"policy.lease", "must be at least 1s", func(p *policy.Policy) { p.Lease = policy.Duration(999 * time.Millisecond) }},
		{"policy.in_doubt", `must be lookup, resend, skip or manual, got "later"`, func(p *policy.Policy) { p.InDoubt = "later" }},
		{"policy.lookup_fallback", `must be resend, skip or manual, got "lookup"`, func(p *policy.Policy) { p.LookupFallback = "lookup" }},
		{"policy.max_age", "must not be negative", func(p *policy.Policy) { p.MaxAge = -1 }},
		{"policy.rate_per_second", "must be a finite number", func(p *policy.Policy) { p.RatePerSecond = math.Inf(1) }},
		{"policy.rate_per_second", "must be a finite number", func(p *policy.Policy) { p.RatePerSecond = math.NaN() }},
		{"policy.rate_per_second", "must not be negative", func(p *policy.Policy) { p.RatePerSecond = -0.5 }},
		{"policy.concurrency", "must be between 1 and 10000, got 0", func(p *policy.Policy) { p.Concurrency = 0 }},
		{"policy.concurrency", "must be between 1 and 10000, got 10001", func(p *policy.Policy) { p.Concurrency = 10001 }},
		{"policy.retention", "must be at least 1h", func(p *policy.Policy) { p.Retention = policy.Duration(time.Hour - time.Second) }},
		{"policy.approval", `must be none or two-person, got "four-eyes"`, func(p *policy.Policy) { p.Approval = "four-eyes" }},
		{"policy.approval", `must be none or two-person, got ""`, func(p *policy.Policy) { p.Approval = "" }},
		{"policy.approval_bulk_threshold", "must be between 1 and 1000000 rows, got 0", func(p *policy.Policy) { p.ApprovalBulkThreshold = 0 }},
		{"policy.approval_expiry", "must be between 1m and 720h, got 30s", func(p *policy.Policy) { p.ApprovalExpiry = policy.Duration(30 * time.Second) }},
	}
	for _, c := range cases {
		p := policy.Default("twilio")
		c.change(&p)
		var bad *policy.Error
		if err := p.Validate(); !errors.As(err, &bad) || bad.Field != c.field || bad.Msg != c.msg {
			t.Errorf("%s: Validate() = %v, want an *Error %s: %s", c.field, err, c.field, c.msg)
		}
	}
	// The bounds themselves are accepted.
	p := policy.Default("twilio")
	p.MaxAttempts, p.Lease, p.Concurrency, p.Retention = 1, policy.MinLease, policy.MaxConcurrency, policy.MinRetention
	p.Backoff.Max = p.Backoff.Base
	if err := p.Validate(); err != nil {
		t.Errorf("a policy at its bounds is refused: %v", err)
	}
}

// TestEffective: the default, then the registered policy, then the override,
// each replacing only the fields it names, key by key inside backoff.
func TestEffective(t *testing.T) {
	t.Parallel()
	p, err := policy.Effective("twilio",
		[]byte(`{"max_attempts": 5, "backoff": {"base": "2s", "max": "1m"}, "lease": "20s"}`),
		[]byte(`{"backoff": {"max": "1h"}, "in_doubt": "skip"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := policy.Default("twilio")
	want.MaxAttempts, want.Lease, want.InDoubt = 5, policy.Duration(20*time.Second), "skip"
	want.Backoff = policy.Backoff{Base: policy.Duration(2 * time.Second), Max: policy.Duration(time.Hour)}
	if p != want {
		t.Errorf("Effective = %+v, want %+v", p, want)
	}
	for _, empty := range [][]byte{nil, []byte("{}")} {
		if p, err := policy.Effective("webhook", empty, empty); err != nil || p != policy.Default("webhook") {
			t.Errorf("Effective with %q layers = %+v, %v; want the default", empty, p, err)
		}
	}
	for _, c := range []struct{ registered, override, want string }{
		{`{"backoff": {"maximum": "1h"}}`, ``, `unknown field "maximum"`},
		{``, `{"lease": 30}`, `want a duration string`},
		{`{"max_attempts": 3}`, `{"max_attempts": 0}`, `policy.max_attempts: must be at least 1`},
		{`{"backoff": {"base": "20m"}}`, ``, `policy.backoff.max: must be at least backoff.base`},
	} {
		if _, err := policy.Effective("twilio", []byte(c.registered), []byte(c.override)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Effective(%s, %s) = %v, want an error with %q", c.registered, c.override, err, c.want)
		}
	}
}

// TestPatch: a JSON merge patch of the stored override: keys replace, objects
// merge key by key, null removes an override, values are stored as the
// effective policy writes them, and what it would make invalid is refused.
func TestPatch(t *testing.T) {
	t.Parallel()
	registered := []byte(`{"max_attempts": 5, "backoff": {"base": "1s", "max": "3m"}}`)
	patch := func(override, body string) (string, error) {
		out, err := policy.Patch("twilio", registered, []byte(override), []byte(body))
		if err != nil {
			return "", err
		}
		b, err := json.Marshal(out)
		return string(b), err
	}
	for _, c := range []struct{ override, body, want string }{
		{``, `{"max_attempts": 3, "backoff": {"base": "2s"}}`, `{"backoff":{"base":"2s"},"max_attempts":3}`},
		{`{"backoff": {"base": "2s"}}`, `{"backoff": {"max": "1h"}}`, `{"backoff":{"base":"2s","max":"1h0m0s"}}`},
		{`{"backoff": {"base": "2s", "max": "1h"}}`, `{"backoff": {"base": null}}`, `{"backoff":{"max":"1h0m0s"}}`},
		{`{"backoff": {"max": "1h"}}`, `{"backoff": {"max": null}}`, `{}`},
		{`{"lease": "1m0s", "in_doubt": "skip"}`, `{"lease": null}`, `{"in_doubt":"skip"}`},
		{`{}`, `{"lease": "90s", "delivery_poll": ["1m", "10m"]}`, `{"delivery_poll":["1m0s","10m0s"],"lease":"1m30s"}`},
	} {
		if got, err := patch(c.override, c.body); err != nil || got != c.want {
			t.Errorf("Patch(%s, %s) = %s, %v; want %s", c.override, c.body, got, err, c.want)
		}
	}
	for _, c := range []struct{ body, field, msg string }{
		{`{}`, "", "the patch names no policy field"},
		{`{"max_attempts": "x"}`, "policy.max_attempts", "cannot unmarshal"},
		{`{"lease": "-1s"}`, "policy.lease", "must be at least 1s"},
		{`{"backoff": {"base": "1h"}}`, "policy.backoff.max", "must be at least backoff.base"},
		{`{"backoff": {"maximum": "1h"}}`, "", `unknown field "maximum"`},
		{`{"rate_per_second": 1e400}`, "policy.rate_per_second", "cannot unmarshal"},
	} {
		_, err := patch(`{"in_doubt": "manual"}`, c.body)
		var bad *policy.Error
		if !errors.As(err, &bad) || bad.Field != c.field || !strings.Contains(bad.Msg, c.msg) {
			t.Errorf("Patch(%s) = %v, want an *Error on %q saying %q", c.body, err, c.field, c.msg)
		}
	}
	if _, err := patch(``, `{"lease": "1m", "bogus": 1}`); !errors.Is(err, policy.ErrUnknownField) || !strings.Contains(err.Error(), `"bogus"`) {
		t.Errorf("Patch with an unknown field = %v, want ErrUnknownField naming it", err)
	}
	if _, err := patch(`[`, `{"lease": "1m"}`); err == nil || errors.Is(err, policy.ErrUnknownField) || errors.As(err, new(*policy.Error)) {
		t.Errorf("Patch of a corrupt stored override = %v, want an error of its own", err)
	}
}

// TestDedupeHorizon: the horizon is dedupe_days, at least the retention in
// whole days, which is also its value when unset; a horizon shorter than the
// retention is refused, naming the field.
func TestDedupeHorizon(t *testing.T) {
	p := policy.Default("stripe")
	if got := p.DedupeHorizonDays(); got != 15 {
		t.Errorf("default horizon = %d days, want the 360h retention's 15", got)
	}
	p.Retention = policy.Duration(361 * time.Hour)
	if got := p.DedupeHorizonDays(); got != 16 {
		t.Errorf("horizon at a 361h retention = %d days, want 16 (rounded up)", got)
	}
	p.DedupeDays = 40
	if got := p.DedupeHorizonDays(); got != 40 || p.Validate() != nil {
		t.Errorf("horizon of dedupe_days 40 = %d, %v", got, p.Validate())
	}
	p.DedupeDays = 10
	var pe *policy.Error
	if err := p.Validate(); !errors.As(err, &pe) || pe.Field != "policy.dedupe_days" {
		t.Errorf("dedupe_days 10 under a 16-day retention: %v, want refused naming policy.dedupe_days", err)
	}
}
