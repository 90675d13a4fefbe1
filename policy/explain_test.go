package policy_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/policy"
)

// TestExplain: each leaf of the effective policy says where its value comes
// from. The registered policy is stored whole, every field, as
// dispatcher.Register writes it: a field the YAML left at its default is
// "default", not "YAML"; an override wins, key by key inside backoff.
func TestExplain(t *testing.T) {
	t.Parallel()
	yaml := policy.Default("twilio")
	yaml.MaxAttempts = 5
	yaml.RatePerSecond = 10
	yaml.Backoff.Max = policy.Duration(time.Hour)
	registered, err := json.Marshal(yaml) // every field, as Register stores it
	if err != nil {
		t.Fatal(err)
	}
	override := []byte(`{"backoff": {"base": "2s"}, "lease": "30s", "rate_per_second": 2, "sweep": {"every": "1h"}}`)
	fields, err := policy.Explain("twilio", registered, override)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fields {
		got = append(got, f.Name+"="+string(f.Value)+" "+string(f.Source))
	}
	want := []string{
		`approval="none" default`,
		`approval_bulk_threshold=100 default`,
		`approval_expiry="24h0m0s" default`,
		`backoff.base="2s" override`,
		`backoff.max="1h0m0s" YAML`,
		`concurrency=16 default`,
		`dedupe_days=0 default`,
		`delivery_poll=[] default`,
		`in_doubt="lookup" default`,
		`lease="30s" override`, // an override equal to the default is still the override's
		`lookup_fallback="manual" default`,
		`lookup_grace="0s" default`,
		`max_age="0s" default`,
		`max_attempts=5 YAML`,
		`rate_per_second=2 override`,
		`retention="360h0m0s" default`,
		`sweep.every="1h0m0s" override`, // an object's keys are leaves of their own
		`sweep.window="0s" default`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Explain:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A row written by hand with only some fields: the others are defaults.
	fields, err = policy.Explain("webhook", []byte(`{"max_attempts": 3}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		want := policy.FromDefault
		if f.Name == "max_attempts" {
			want = policy.FromYAML
		}
		if f.Source != want {
			t.Errorf("hand-written row: %s from %s, want %s", f.Name, f.Source, want)
		}
		if f.Name == "in_doubt" && string(f.Value) != `"resend"` {
			t.Errorf("webhook in_doubt = %s, want the webhook default", f.Value)
		}
	}

	if _, err := policy.Explain("twilio", []byte(`{"max_attempts": 0}`), nil); err == nil {
		t.Error("an invalid stored policy: no error")
	}
}

// TestDurationShort: a duration reads as a person writes it, and parses back.
func TestDurationShort(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0: "0s", time.Second: "1s", 90 * time.Second: "1m30s", 10 * time.Minute: "10m", time.Hour: "1h",
		90 * time.Minute: "1h30m", 360 * time.Hour: "360h", 1500 * time.Millisecond: "1.5s",
	} {
		got := policy.Duration(d).Short()
		if back, err := time.ParseDuration(got); got != want || err != nil || back != d {
			t.Errorf("Duration(%v).Short() = %q (parses as %v, %v), want %q", d, got, back, err, want)
		}
	}
}
