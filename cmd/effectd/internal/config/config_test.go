package config

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/api"
	"github.com/effectd/effectd/dispatcher"
)

var secrets = map[string]string{
	"STRIPE_API_KEY":                "sk_test_x",
	"TWILIO_ACCOUNT_SID":            "AC00000000000000000000000000000000",
	"TWILIO_AUTH_TOKEN":             "t",
	"HOOK_SECRET":                   "whsec_ZWZmZWN0ZC10ZXN0LXNlY3JldC1rZXktMTIzNA==",
	"SANDBOX_WEBHOOK_SECRET":        "whsec_ZWZmZWN0ZC10ZXN0LXNlY3JldC1rZXktMTIzNA==",
	"SANDBOX_STRIPE_WEBHOOK_SECRET": "whsec_stripe",
}

func getenv(k string) string { return secrets[k] }

func TestExampleConfig(t *testing.T) {
	chans, err := Load("../../effectd.example.yaml", getenv)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]dispatcher.Channel{}
	for _, c := range chans {
		byName[c.Name] = c
	}
	sms := byName["sms"]
	if sms.Kind != "twilio" || sms.Policy.RatePerSecond != 10 || sms.Policy.LookupFallback != "resend" ||
		sms.Policy.MaxAge.D() != 10*time.Minute || sms.Policy.Backoff.Max.D() != 10*time.Minute {
		t.Errorf("sms = %+v", sms.Policy)
	}
	refund := byName["refund"]
	// Fields the YAML does not name keep the provider's defaults.
	if refund.Policy.LookupFallback != "manual" || refund.Policy.MaxAttempts != 8 || refund.Policy.Lease.D() != 30*time.Second {
		t.Errorf("refund = %+v", refund.Policy)
	}
	if byName["demo-hook"].Policy.Backoff.Base.D() != 500*time.Millisecond || byName["demo-hook"].Policy.Backoff.Max.D() != time.Minute {
		t.Errorf("demo-hook backoff = %+v", byName["demo-hook"].Policy.Backoff)
	}
	for _, c := range chans {
		if c.Provider == nil {
			t.Errorf("%s has no provider", c.Name)
		}
	}
}

func TestPartialBackoffKeepsDefault(t *testing.T) {
	chans, err := Parse([]byte("channels:\n  h:\n    provider: webhook\n    webhook: {url: 'http://127.0.0.1:1/x', secret_env: HOOK_SECRET}\n    policy: {backoff: {base: 2s}}\n"), getenv)
	if err != nil {
		t.Fatal(err)
	}
	if b := chans[0].Policy.Backoff; b.Base.D() != 2*time.Second || b.Max.D() != 10*time.Minute {
		t.Fatalf("backoff = %+v", b)
	}
}

func TestInvalidConfig(t *testing.T) {
	hook := "    provider: webhook\n    webhook: {url: 'http://127.0.0.1:1/x', secret_env: HOOK_SECRET}\n"
	cases := []struct{ name, yaml, want string }{
		{"empty", "", "define at least one channel"},
		{"no channels", "channels: {}\n", "define at least one channel"},
		{"unknown top key", "chanels: {}\n", "field chanels not found"},
		{"unknown provider", "channels:\n  x:\n    provider: fax\n", `channels.x.provider: line 3: unknown provider "fax"`},
		{"missing provider", "channels:\n  x:\n    policy: {}\n", "channels.x.provider: line 2: is required"},
		{"unknown channel key", "channels:\n  x:\n" + hook + "    retries: 3\n", "field retries not found"},
		{"unknown policy key", "channels:\n  x:\n" + hook + "    policy: {lease: 5s, leese: 5s}\n", "field leese not found"},
		{"negative lease", "channels:\n  x:\n" + hook + "    policy: {lease: -5s}\n", "channels.x.policy.lease"},
		{"negative max_age", "channels:\n  x:\n" + hook + "    policy: {max_age: -1m}\n", "channels.x.policy.max_age"},
		{"bad duration", "channels:\n  x:\n" + hook + "    policy: {lease: soon}\n", `want a duration such as "30s", got "soon"`},
		{"bad in_doubt", "channels:\n  x:\n" + hook + "    policy: {in_doubt: pray}\n", "channels.x.policy.in_doubt"},
		{"zero concurrency", "channels:\n  x:\n" + hook + "    policy: {concurrency: 0}\n", "channels.x.policy.concurrency"},
		{"missing webhook secret", "channels:\n  x:\n    provider: webhook\n    webhook: {url: 'http://h/x', secret_env: NOPE}\n", `channels.x.webhook.secret_env: line 4: the environment variable "NOPE" is not set`},
		{"missing webhook url", "channels:\n  x:\n    provider: webhook\n    webhook: {secret_env: HOOK_SECRET}\n", "channels.x.webhook.url: line 4: is required"},
		{"wrong block", "channels:\n  x:\n    provider: stripe\n    twilio: {from: '+1'}\n", "channels.x.twilio: line 4: this block belongs to provider twilio"},
		{"bad name", "channels:\n  'a b':\n" + hook, "a channel name is"},
		{"notify nowhere", "channels:\n  x:\n" + hook + "    notify: {channel: nope, on: [sent]}\n", `channels.x.notify.channel: line 5: no channel "nope"`},
		{"notify a stripe channel", "channels:\n  r:\n    provider: stripe\n  x:\n" + hook + "    notify: {channel: r, on: [sent]}\n", `channels.x.notify.channel: line 7: "r" is a stripe channel`},
		{"notify a notifying channel", "channels:\n  y:\n" + hook + "    notify: {channel: x, on: [sent]}\n  x:\n" + hook + "    notify: {channel: y, on: [sent]}\n", "has a notify of its own"},
		{"notify unknown outcome", "channels:\n  y:\n" + hook + "  x:\n" + hook + "    notify: {channel: y, on: [sent, read]}\n", `channels.x.notify.on: line 8: unknown outcome "read"`},
		{"notify nothing", "channels:\n  y:\n" + hook + "  x:\n" + hook + "    notify: {channel: y}\n", "channels.x.notify.on: line 8: list at least one"},
		{"notify unknown key", "channels:\n  y:\n" + hook + "  x:\n" + hook + "    notify: {channel: y, on: [sent], when: always}\n", "field when not found"},
		{"delivery_poll not increasing", "channels:\n  x:\n" + hook + "    policy: {delivery_poll: [10m, 1m]}\n", "channels.x.policy.delivery_poll: line 5: delay 2: must be longer than the one before"},
		{"sweep a webhook channel", "channels:\n  x:\n" + hook + "    policy: {sweep: {every: 1h}}\n", "channels.x.policy.sweep.every: line 5: a webhook channel cannot be swept"},
		{"missing stripe webhook secret", "channels:\n  r:\n    provider: stripe\n    stripe: {webhook_secret_env: NOPE}\n", `channels.r.stripe.webhook_secret_env: line 4: the environment variable "NOPE" is not set`},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yaml), getenv)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v; want it to contain %q", c.name, err, c.want)
		}
	}
	// Missing provider secrets.
	noSecrets := func(string) string { return "" }
	for _, c := range []struct{ yaml, want string }{
		{"channels:\n  r:\n    provider: stripe\n", "channels.r: line 2: STRIPE_API_KEY must be set"},
		{"channels:\n  s:\n    provider: twilio\n    twilio: {from: '+15005550006'}\n", "channels.s"},
	} {
		if _, err := Parse([]byte(c.yaml), noSecrets); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v; want %q", c.yaml, err, c.want)
		}
	}
}

// TestNotifyAndIngress: notify reaches the channel; the ingress receives the
// events of twilio channels with a status_callback and stripe channels with a
// webhook secret, and no others.
func TestNotifyAndIngress(t *testing.T) {
	y := []byte(`channels:
  sms:
    provider: twilio
    twilio: {from: "+15005550006", status_callback: "https://fx.example/ingress/twilio/sms"}
    notify: {channel: events, on: [sent, undelivered]}
  quiet:
    provider: twilio
    twilio: {from: "+15005550006"}
  refund:
    provider: stripe
    stripe: {webhook_secret_env: HOOK_SECRET}
  events:
    provider: webhook
    webhook: {url: "http://127.0.0.1:1/x", secret_env: HOOK_SECRET}
`)
	chans, err := Parse(y, getenv)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chans {
		if c.Name == "sms" && (c.Notify == nil || c.Notify.Channel != "events" || strings.Join(c.Notify.On, ",") != "sent,undelivered") {
			t.Errorf("sms notify = %+v", c.Notify)
		}
	}
	in, err := ParseIngress(y, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if len(in) != 2 || in[0].Name != "refund" || in[0].StripeSecret != secrets["HOOK_SECRET"] ||
		in[1].Name != "sms" || in[1].TwilioAuthToken != "t" || in[1].StatusCallback != "https://fx.example/ingress/twilio/sms" {
		t.Errorf("ingress channels = %+v", in)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("/nonexistent/effectd.yaml", getenv)
	if err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("err = %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

const accessChannels = `
channels:
  sms:
    provider: twilio
    twilio: {from: "+15005550006"}
    redact: [to, body]
  refund: {provider: stripe}
  payout-eu: {provider: stripe}
`

func TestAccess(t *testing.T) {
	hash := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" // sha256("test")
	a, err := ParseAccess([]byte(accessChannels + `
access:
  tokens:
    - {name: payments-oncall, sha256: "` + hash + `", role: operator, channels: ["refund", "payout-*"], approve: [refund]}
    - {name: auditor, sha256: "` + strings.Repeat("ab", 32) + `", role: viewer}
  producers:
    sms_app: [sms]
    payments_app: ["refund", "payout-*"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Tokens) != 2 || a.Tokens[0].Name != "payments-oncall" || a.Tokens[0].Role != "operator" ||
		strings.Join(a.Tokens[0].Channels, ",") != "refund,payout-*" || a.Tokens[1].Channels != nil ||
		strings.Join(a.Tokens[0].Approves, ",") != "refund" || a.Tokens[1].Approves != nil {
		t.Errorf("tokens = %+v", a.Tokens)
	}
	if p, ok := api.Tokens(a.Tokens).Authenticate("test"); !ok || p.Name != "payments-oncall" {
		t.Errorf("the token whose sha256 is listed does not authenticate: %+v %v", p, ok)
	}
	if len(a.Producers) != 2 || a.Producers[0].Role != "payments_app" || a.Producers[1].Role != "sms_app" {
		t.Errorf("producers = %+v", a.Producers)
	}
	chans, err := Parse([]byte(accessChannels), getenv)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chans {
		if c.Name == "sms" && strings.Join(c.Redact, ",") != "to,body" {
			t.Errorf("sms redact = %v", c.Redact)
		}
	}
	if a, err := ParseAccess([]byte(accessChannels)); err != nil || a.Tokens != nil || a.Producers != nil {
		t.Errorf("no access section: %+v, %v", a, err)
	}
}

func TestAccessErrors(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	tests := []struct{ yaml, field string }{
		{`tokens: [{sha256: "` + hash + `", role: viewer}]`, "access.tokens[0].name"},
		{`tokens: [{name: a, sha256: "abc", role: viewer}]`, "access.tokens[0].sha256"},
		{`tokens: [{name: a, sha256: "` + hash + `", role: root}]`, "access.tokens[0].role"},
		{`tokens: [{name: a, sha256: "` + hash + `", role: admin, channels: [sms]}]`, "access.tokens[0].channels"},
		{`tokens: [{name: a, sha256: "` + hash + `", role: viewer, channels: ["sms["]}]`, "access.tokens[0].channels[0]"},
		{`tokens: [{name: a, sha256: "` + hash + `", role: viewer, channels: [smss]}]`, "access.tokens[0].channels[0]"},
		{`tokens: [{name: a, sha256: "` + hash + `", role: viewer}, {name: a, sha256: "` + strings.Repeat("cd", 32) + `", role: viewer}]`, "access.tokens[1].name"},
		{`tokens: [{name: a, sha256: "` + hash + `", role: viewer}, {name: b, sha256: "` + hash + `", role: viewer}]`, "access.tokens[1].sha256"},
		{`tokens: [{name: a, secret: x, role: viewer}]`, "secret"},
		{`producers: {app: []}`, "access.producers.app"},
		{`producers: {app: [nope]}`, "access.producers.app[0]"},
		{`owners: {}`, "owners"},
		{`tokens: [{name: a, sha256: "` + hash + `", role: viewer, approve: [sms]}]`, "access.tokens[0].approve"},
		{`tokens: [{name: a, sha256: "` + hash + `", role: operator, approve: [smss]}]`, "access.tokens[0].approve[0]"},
	}
	for _, tt := range tests {
		_, err := ParseAccess([]byte(accessChannels + "access:\n  " + tt.yaml + "\n"))
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: %v, want an error naming %s", tt.yaml, err, tt.field)
		}
	}
	if _, err := Parse([]byte("channels:\n  sms: {provider: twilio, twilio: {from: '+15005550006'}, redact: [to, to]}\n"), getenv); err == nil || !strings.Contains(err.Error(), "channels.sms.redact[1]") {
		t.Errorf("redact listed twice: %v", err)
	}
}
