package config

import (
	"math"
	"strings"
	"testing"
)

// TestErrorsNameKeyAndLine: every error names the key it is about and that
// key's line, also inside flow mappings ({a: 1, b: x}) spread over lines; a
// non-finite rate is refused naming its key; a refused huge value is never
// echoed whole.
func TestErrorsNameKeyAndLine(t *testing.T) {
	hook := "    provider: webhook\n    webhook: {url: 'http://127.0.0.1:1/x', secret_env: HOOK_SECRET}\n"
	big := strings.Repeat("9", 1<<20)
	cases := []struct{ name, yaml, want string }{
		{"wrong type in a flow mapping", "channels:\n  x:\n" + hook + "    policy: {lease: 5s,\n      max_attempts: many}\n",
			"channels.x.policy.max_attempts: line 6: cannot unmarshal !!str `many` into int"},
		{"unknown key in a flow mapping", "channels:\n  x:\n" + hook + "    policy: {lease: 5s,\n      leese: 5s}\n",
			"channels.x.policy: line 6: field leese not found"},
		{"nested flow mapping", "channels:\n  x:\n" + hook + "    policy: {lease: 5s,\n      backoff: {base: 1s,\n        max: soon}}\n",
			`channels.x.policy.backoff.max: line 7: want a duration such as "30s", got "soon"`},
		{"block mapping", "channels:\n  x:\n" + hook + "    policy:\n      lease: 5s\n      max_attempts: many\n",
			"channels.x.policy.max_attempts: line 7: cannot unmarshal"},
		{"flow mapping of a provider block", "channels:\n  x:\n    provider: webhook\n    webhook: {url: 'http://127.0.0.1:1/x',\n       secret_env: HOOK_SECRET, timeout: [1]}\n",
			"channels.x.webhook.timeout: line 5: want a duration"},
		{"a delay of delivery_poll", "channels:\n  x:\n" + hook + "    policy:\n      delivery_poll:\n        - 1m\n        - soon\n",
			`channels.x.policy.delivery_poll: line 7: delay 2: want a duration such as "30s", got "soon"`},
		{"delivery_poll not a list", "channels:\n  x:\n" + hook + "    policy: {delivery_poll: 1m}\n",
			`channels.x.policy.delivery_poll: line 5: want a list of durations such as ["1m", "10m"]`},
		{"repeated key", "channels:\n  x:\n" + hook + "    policy: {lease: 5s, lease: 6s}\n",
			`channels.x.policy: line 5: key "lease" is repeated (first at line 5)`},
		{"invalid value after decoding", "channels:\n  x:\n" + hook + "    policy:\n      max_attempts: 3\n      lease: 100ms\n",
			"channels.x.policy.lease: line 7: must be at least 1s"},
		{"NaN rate", "channels:\n  x:\n" + hook + "    policy: {rate_per_second: .nan}\n",
			"channels.x.policy.rate_per_second: line 5: must be a finite number"},
		{"infinite rate", "channels:\n  x:\n" + hook + "    policy:\n      rate_per_second: .inf\n",
			"channels.x.policy.rate_per_second: line 6: must be a finite number"},
		{"negative infinite rate", "channels:\n  x:\n" + hook + "    policy: {rate_per_second: -.Inf}\n",
			"channels.x.policy.rate_per_second: line 5: must be a finite number"},
		{"huge duration", "channels:\n  x:\n" + hook + "    policy: {lease: " + big + "}\n", "channels.x.policy.lease: line 5: want a duration"},
		{"huge integer", "channels:\n  x:\n" + hook + "    policy: {max_attempts: " + big + "}\n", "channels.x.policy.max_attempts: line 5:"},
		{"huge in_doubt", "channels:\n  x:\n" + hook + "    policy: {in_doubt: " + big + "}\n", "channels.x.policy.in_doubt: line 5: must be lookup"},
		{"huge provider", "channels:\n  x:\n    provider: " + big + "\n", "channels.x.provider: line 3: unknown provider"},
		{"long unknown key", "channels:\n  x:\n" + hook + "    " + big[:1000] + ": 1\n", "channels.x: line 5: field 9999"},
		{"huge secret_env", "channels:\n  x:\n    provider: webhook\n    webhook: {url: 'http://h/x', secret_env: " + big + "}\n", "channels.x.webhook.secret_env: line 4:"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yaml), getenv)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %.300v; want it to contain %q", c.name, err, c.want)
			continue
		}
		if len(err.Error()) > 400 || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: a %d-byte message: %.300s", c.name, len(err.Error()), err)
		}
	}
}

// TestAnchorsAndMergeKeys: aliases and merge keys work as yaml.v3 reads them;
// a mapping's own keys win over merged ones.
func TestAnchorsAndMergeKeys(t *testing.T) {
	_, err := Parse([]byte(`
base: &base {max_attempts: 3, lease: 20s}
channels:
  a:
    provider: webhook
    webhook: &hook {url: 'http://127.0.0.1:1/x', secret_env: HOOK_SECRET}
    policy: {<<: *base, lease: 40s}
  b:
    provider: webhook
    webhook: *hook
`), getenv)
	if err == nil || !strings.Contains(err.Error(), "line 2: field base not found") {
		t.Fatalf("an unknown top-level key: %v", err)
	}
	chans, err := Parse([]byte(`
channels:
  a:
    provider: webhook
    webhook: &hook {url: 'http://127.0.0.1:1/x', secret_env: HOOK_SECRET}
    policy: &p {max_attempts: 3, lease: 20s, rate_per_second: 2.5}
  b:
    provider: webhook
    webhook: *hook
    policy: {<<: *p, lease: 40s}
`), getenv)
	if err != nil {
		t.Fatal(err)
	}
	a, b := chans[0].Policy, chans[1].Policy
	if a.MaxAttempts != 3 || a.Lease.D().Seconds() != 20 || b.MaxAttempts != 3 || b.Lease.D().Seconds() != 40 || b.RatePerSecond != 2.5 || math.IsNaN(b.RatePerSecond) {
		t.Errorf("a %+v, b %+v", a, b)
	}
}
