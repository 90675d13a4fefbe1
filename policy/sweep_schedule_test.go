package policy_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/policy"
)

// TestSweepSchedule: a channel's sweep schedule is off by default; on, it
// sweeps at least every minute a window of at least its interval and at most
// the sweep's cap; a webhook channel has none. Each refusal is an *Error
// naming the field, through Effective (the YAML and the override) and Patch
// (the admin API) alike.
func TestSweepSchedule(t *testing.T) {
	t.Parallel()
	if s := policy.Default("twilio").Sweep; s != (policy.SweepSchedule{}) {
		t.Errorf("default sweep = %+v, want off", s)
	}
	cases := []struct {
		kind, layer string
		field, msg  string // "": accepted
		window      time.Duration
	}{
		{"twilio", `{}`, "", "", 0},
		{"stripe", `{"sweep": {"every": "1h"}}`, "", "", time.Hour},
		{"stripe", `{"sweep": {"every": "1m", "window": "2h"}}`, "", "", 2 * time.Hour},
		{"twilio", `{"sweep": {"every": "168h", "window": "168h"}}`, "", "", 168 * time.Hour},
		{"twilio", `{"sweep": {"window": "2h"}}`, "", "", 2 * time.Hour}, // off: a window alone sweeps nothing
		{"webhook", `{"sweep": {"every": "0s", "window": "1h"}}`, "", "", time.Hour},
		{"twilio", `{"sweep": {"every": "-1m"}}`, "policy.sweep.every", "must not be negative", 0},
		{"twilio", `{"sweep": {"every": "59s"}}`, "policy.sweep.every", "must be 0 (off) or at least 1m, got 59s", 0},
		{"twilio", `{"sweep": {"every": "169h"}}`, "policy.sweep.every", "must be at most 168h, the longest window a sweep reads, got 169h", 0},
		{"twilio", `{"sweep": {"every": "1h", "window": "-1h"}}`, "policy.sweep.window", "must not be negative", 0},
		{"stripe", `{"sweep": {"every": "1h", "window": "169h"}}`, "policy.sweep.window", "must be at most 168h, the longest window a sweep reads, got 169h", 0},
		{"stripe", `{"sweep": {"every": "2h", "window": "1h"}}`, "policy.sweep.window",
			"must be at least sweep.every (2h) or 0 (the same), else intents created between two sweeps are never swept", 0},
		{"webhook", `{"sweep": {"every": "1h"}}`, "policy.sweep.every",
			"a webhook channel cannot be swept (its receiver lists nothing): only stripe and twilio channels have a sweep schedule", 0},
	}
	for _, c := range cases {
		for _, via := range []string{"YAML", "override", "patch"} {
			var p policy.Policy
			var err error
			switch via {
			case "YAML":
				p, err = policy.Effective(c.kind, []byte(c.layer), nil)
			case "override":
				p, err = policy.Effective(c.kind, nil, []byte(c.layer))
			case "patch":
				if c.layer == `{}` {
					continue // a patch names a field
				}
				_, err = policy.Patch(c.kind, nil, nil, []byte(c.layer))
			}
			var bad *policy.Error
			switch {
			case c.field == "" && err != nil:
				t.Errorf("%s %s by %s: %v, want accepted", c.kind, c.layer, via, err)
			case c.field == "" && via != "patch" && p.Sweep.WindowOrEvery().D() != c.window:
				t.Errorf("%s %s by %s: window %s, want %s", c.kind, c.layer, via, p.Sweep.WindowOrEvery(), c.window)
			case c.field != "" && (!errors.As(err, &bad) || bad.Field != c.field || bad.Msg != c.msg):
				t.Errorf("%s %s by %s: %v, want an *Error %s: %s", c.kind, c.layer, via, err, c.field, c.msg)
			}
		}
	}
	// ValidateFor is what Register, dispatcher.New and the YAML loader ask.
	p := policy.Default("webhook")
	p.Sweep.Every = policy.Duration(time.Hour)
	if err := p.Validate(); err != nil {
		t.Errorf("Validate, which knows no provider, refused %+v: %v", p.Sweep, err)
	}
	if err := p.ValidateFor("webhook"); err == nil || !strings.HasPrefix(err.Error(), "policy.sweep.every: ") {
		t.Errorf("ValidateFor(webhook) = %v, want policy.sweep.every refused", err)
	}
}
