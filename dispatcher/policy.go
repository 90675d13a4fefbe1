package dispatcher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// In-doubt policies: what the reconciler does with a call whose lease expired.
const (
	InDoubtLookup = "lookup" // ask the provider
	InDoubtResend = "resend" // send again (risk: a duplicate)
	InDoubtSkip   = "skip"   // do not send (risk: a gap)
	InDoubtManual = "manual" // IN_DOUBT: hand to an operator
)

// Backoff is the exponential retry delay, from Base doubling up to Max, with
// equal jitter: a delay d is drawn from [d/2, d].
type Backoff struct {
	Base Duration `json:"base" yaml:"base"`
	Max  Duration `json:"max" yaml:"max"`
}

// Policy is how a channel sends, retries and settles its intents.
type Policy struct {
	MaxAttempts    int      `json:"max_attempts" yaml:"max_attempts"`
	Backoff        Backoff  `json:"backoff" yaml:"backoff"`
	Lease          Duration `json:"lease" yaml:"lease"`
	InDoubt        string   `json:"in_doubt" yaml:"in_doubt"`
	LookupFallback string   `json:"lookup_fallback" yaml:"lookup_fallback"`
	MaxAge         Duration `json:"max_age" yaml:"max_age"`
	RatePerSecond  float64  `json:"rate_per_second" yaml:"rate_per_second"`
	Concurrency    int      `json:"concurrency" yaml:"concurrency"`
	Retention      Duration `json:"retention" yaml:"retention"`
	// DeliveryPoll lists the delays after SENT at which the provider is asked
	// what became of the effect, until its delivery is final; empty: never.
	DeliveryPoll PollDelays `json:"delivery_poll" yaml:"delivery_poll"`
}

// DefaultPolicy is the policy of a channel whose YAML says nothing. in_doubt
// defaults to lookup where the provider can look up, and to manual elsewhere.
func DefaultPolicy(provider string) Policy {
	p := Policy{
		MaxAttempts:    8,
		Backoff:        Backoff{Base: Duration(1e9), Max: Duration(600e9)},
		Lease:          Duration(30e9),
		InDoubt:        InDoubtLookup,
		LookupFallback: InDoubtManual,
		Concurrency:    16,
		Retention:      Duration(360 * 3600e9),
	}
	if provider == "webhook" {
		// Receivers deduplicate by webhook-id, so sending again is the lookup.
		p.InDoubt = InDoubtResend
	}
	return p
}

// Validate returns an *InputError naming the first invalid field, as
// policy.<field>, such as policy.backoff.max.
func (p Policy) Validate() error {
	bad := func(field, msg string) error {
		return &InputError{Field: "policy." + field, Message: "policy." + field + ": " + msg}
	}
	switch {
	case p.MaxAttempts < 1:
		return bad("max_attempts", fmt.Sprintf("must be at least 1, got %d", p.MaxAttempts))
	case p.Backoff.Base <= 0:
		return bad("backoff.base", "must be positive")
	case p.Backoff.Max < p.Backoff.Base:
		return bad("backoff.max", "must be at least backoff.base")
	case p.Lease < Duration(1e9):
		return bad("lease", "must be at least 1s")
	case !oneOf(p.InDoubt, InDoubtLookup, InDoubtResend, InDoubtSkip, InDoubtManual):
		return bad("in_doubt", "must be lookup, resend, skip or manual, got "+quoteShort(p.InDoubt))
	case !oneOf(p.LookupFallback, InDoubtResend, InDoubtSkip, InDoubtManual):
		return bad("lookup_fallback", "must be resend, skip or manual, got "+quoteShort(p.LookupFallback))
	case p.MaxAge < 0:
		return bad("max_age", "must not be negative")
	case math.IsNaN(p.RatePerSecond) || math.IsInf(p.RatePerSecond, 0):
		return bad("rate_per_second", "must be a finite number")
	case p.RatePerSecond < 0:
		return bad("rate_per_second", "must not be negative")
	case p.Concurrency < 1 || p.Concurrency > 10000:
		return bad("concurrency", fmt.Sprintf("must be between 1 and 10000, got %d", p.Concurrency))
	case p.Retention < Duration(3600e9):
		return bad("retention", "must be at least 1h")
	}
	return nil
}

// Merge returns p with the fields present in patch (a JSON object) replaced.
// Unknown fields and wrong types are refused, and the result is validated.
func (p Policy) Merge(patch []byte) (Policy, error) {
	dec := json.NewDecoder(bytes.NewReader(patch))
	dec.DisallowUnknownFields()
	out := p
	if err := dec.Decode(&out); err != nil {
		return p, fmt.Errorf("policy: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return p, fmt.Errorf("policy: trailing data after the JSON object")
	}
	if err := out.Validate(); err != nil {
		return p, err
	}
	return out, nil
}

// quoteShort quotes s for a message, cut to a few dozen bytes: a refused
// value is never echoed whole.
func quoteShort(s string) string {
	if len(s) > 40 {
		return strconv.Quote(s[:40]) + "…"
	}
	return strconv.Quote(s)
}

func oneOf(s string, set ...string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}
