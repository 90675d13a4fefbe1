package effectdtype

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// In-doubt policies: what the reconciler does with a call whose lease expired.
const (
	InDoubtLookup = "lookup" // ask the provider
	InDoubtResend = "resend" // send again (risk: a duplicate)
	InDoubtSkip   = "skip"   // do not send (risk: a gap)
	InDoubtManual = "manual" // IN_DOUBT: hand to an operator
)

// The defaults of a channel whose YAML says nothing. MaxAge, RatePerSecond,
// DeliveryPoll and Sweep default to zero: no age limit, no rate limit, no
// polling, no scheduled sweep.
const (
	DefaultMaxAttempts    = 8
	DefaultBackoffBase    = Duration(time.Second)
	DefaultBackoffMax     = Duration(10 * time.Minute)
	DefaultLease          = Duration(30 * time.Second)
	DefaultInDoubt        = InDoubtLookup // where the provider can look up
	DefaultWebhookInDoubt = InDoubtResend // receivers deduplicate by webhook-id, so sending again is the lookup
	DefaultLookupFallback = InDoubtManual
	DefaultConcurrency    = 16
	DefaultRetention      = Duration(360 * time.Hour)
	// DefaultApproval runs every operator action at once (no second person).
	DefaultApproval = ApprovalNone
	// DefaultApprovalBulkThreshold is how many rows a bulk action of a
	// two-person channel may hold before it needs approval.
	DefaultApprovalBulkThreshold = 100
	// DefaultApprovalExpiry is how long an approval request waits for a decision.
	DefaultApprovalExpiry = Duration(24 * time.Hour)
)

// Approval modes: who decides an operator's risky action on a channel.
const (
	ApprovalNone      = "none"       // the operator alone
	ApprovalTwoPerson = "two-person" // a request another person with the approve right decides
)

// The bounds of an approval request's expiry.
const (
	MinApprovalExpiry = Duration(time.Minute)
	MaxApprovalExpiry = Duration(30 * 24 * time.Hour)
)

// The bounds Validate holds a policy to.
const (
	MinLease = Duration(time.Second)
	// MinCallTime is the least of a lease that lookup_grace must leave for
	// the call itself.
	MinCallTime    = Duration(500 * time.Millisecond)
	MaxConcurrency = 10000
	MinRetention   = Duration(time.Hour)
	MinSweepEvery  = Duration(time.Minute)
	// MaxDedupeDays bounds a channel's dedupe horizon (ten years).
	MaxDedupeDays = 3650
	// MaxSweepWindow is the longest window one reconciliation sweep reads.
	MaxSweepWindow = Duration(7 * 24 * time.Hour)
)

// Policy is how a channel sends, retries and settles its intents.
type Policy struct {
	MaxAttempts    int      `json:"max_attempts" yaml:"max_attempts"`       // calls before FAILED [DefaultMaxAttempts]
	Backoff        Backoff  `json:"backoff" yaml:"backoff"`                 // [DefaultBackoffBase, DefaultBackoffMax]
	Lease          Duration `json:"lease" yaml:"lease"`                     // a SENDING row older than this is in doubt [DefaultLease]
	InDoubt        string   `json:"in_doubt" yaml:"in_doubt"`               // InDoubt… [DefaultInDoubt; DefaultWebhookInDoubt]
	LookupFallback string   `json:"lookup_fallback" yaml:"lookup_fallback"` // when a lookup cannot tell [DefaultLookupFallback]
	// LookupGrace is how long the provider may still act on a request after
	// effectd stopped waiting for it (GraceAfterCall) [0: a tenth of the lease].
	LookupGrace   Duration `json:"lookup_grace" yaml:"lookup_grace"`
	MaxAge        Duration `json:"max_age" yaml:"max_age"`                 // older than this when due: SKIPPED [0: no limit]
	RatePerSecond float64  `json:"rate_per_second" yaml:"rate_per_second"` // shared by all instances [0: no limit]
	Concurrency   int      `json:"concurrency" yaml:"concurrency"`         // in-flight calls per instance [DefaultConcurrency]
	Retention     Duration `json:"retention" yaml:"retention"`             // terminal rows kept at least this long [DefaultRetention]
	// DedupeDays is the dedupe horizon in UTC days: a redelivery of an event
	// within it never makes a second intent, even after the first intent's
	// row was pruned. At least the retention in whole days, which is also
	// its value when 0 (DedupeHorizonDays).
	DedupeDays int `json:"dedupe_days" yaml:"dedupe_days"`
	// DeliveryPoll lists the delays after SENT at which the provider is asked
	// what became of the effect, until its delivery is final; empty: never.
	DeliveryPoll PollDelays `json:"delivery_poll" yaml:"delivery_poll"`
	// Sweep schedules the channel's reconciliation sweep [0: off]; a
	// webhook channel, whose receiver lists nothing, has none.
	Sweep SweepSchedule `json:"sweep" yaml:"sweep"`
	// Approval is ApprovalNone or ApprovalTwoPerson: with two-person, a
	// resolve as sent or skip, a send forced past the key window, a bulk
	// action over ApprovalBulkThreshold rows and a change of this policy
	// become requests another person approves [DefaultApproval].
	Approval              string   `json:"approval" yaml:"approval"`
	ApprovalBulkThreshold int      `json:"approval_bulk_threshold" yaml:"approval_bulk_threshold"` // [DefaultApprovalBulkThreshold]
	ApprovalExpiry        Duration `json:"approval_expiry" yaml:"approval_expiry"`                 // a request undecided this long expires [DefaultApprovalExpiry]
}

// TwoPerson reports whether the channel's risky operator actions need a second person.
func (p Policy) TwoPerson() bool { return p.Approval == ApprovalTwoPerson }

// SweepSchedule runs a reconciliation sweep at every multiple of Every on
// the clock (every: 1h sweeps on the hour) of the Window ending at that
// multiple, widened back to the end of the last window the schedule
// finished, so that the windows leave no gap.
type SweepSchedule struct {
	Every  Duration `json:"every" yaml:"every"`   // 0: never
	Window Duration `json:"window" yaml:"window"` // at least Every; 0: Every
}

// WindowOrEvery returns the window a scheduled sweep reads: Window, or Every
// when Window is 0.
func (s SweepSchedule) WindowOrEvery() Duration {
	if s.Window == 0 {
		return s.Every
	}
	return s.Window
}

// GraceAfterCall is how long the provider may still act on a request after
// effectd stopped waiting for it: LookupGrace, or a tenth of the lease when
// that is 0. A call's deadline is this much before its lease ends, and a call
// that may have sent keeps its row SENDING this long after it ended, so the
// reconciler looks up no sooner than this after the last request could have
// reached the provider: a lookup's "absent" is then proof, not a race with a
// provider still making the object.
func (p Policy) GraceAfterCall() time.Duration {
	if p.LookupGrace == 0 {
		return p.Lease.D() / 10
	}
	return p.LookupGrace.D()
}

// RetentionDays is the retention rounded up to whole days.
func (p Policy) RetentionDays() int {
	return int((time.Duration(p.Retention) + 24*time.Hour - 1) / (24 * time.Hour))
}

// DedupeHorizonDays is the channel's dedupe horizon in days: DedupeDays, at
// least RetentionDays (effectd.dedupe_days computes the same in SQL).
func (p Policy) DedupeHorizonDays() int {
	return max(p.DedupeDays, p.RetentionDays())
}

// DefaultPolicy returns the policy of a channel of provider kind whose YAML
// says nothing: the Default constants, with in_doubt resend for a webhook.
func DefaultPolicy(kind string) Policy {
	p := Policy{
		MaxAttempts:    DefaultMaxAttempts,
		Backoff:        Backoff{Base: DefaultBackoffBase, Max: DefaultBackoffMax},
		Lease:          DefaultLease,
		InDoubt:        DefaultInDoubt,
		LookupFallback: DefaultLookupFallback,
		Concurrency:    DefaultConcurrency,
		Retention:      DefaultRetention,

		Approval:              DefaultApproval,
		ApprovalBulkThreshold: DefaultApprovalBulkThreshold,
		ApprovalExpiry:        DefaultApprovalExpiry,
	}
	if kind == "webhook" {
		p.InDoubt = DefaultWebhookInDoubt
	}
	return p
}

// PolicyError is an invalid policy: Field names the field as
// policy.<field>, such as policy.backoff.max, or is empty when the policy as
// a whole is refused.
type PolicyError struct {
	Field string
	Msg   string
}

// Error reads "policy.backoff.max: must be at least backoff.base".
func (e *PolicyError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// Validate returns a *PolicyError naming the first invalid field.
func (p Policy) Validate() error {
	bad := func(field, msg string) error { return &PolicyError{Field: "policy." + field, Msg: msg} }
	switch {
	case p.MaxAttempts < 1:
		return bad("max_attempts", fmt.Sprintf("must be at least 1, got %d", p.MaxAttempts))
	case p.Backoff.Base <= 0:
		return bad("backoff.base", "must be positive")
	case p.Backoff.Max < p.Backoff.Base:
		return bad("backoff.max", "must be at least backoff.base")
	case p.Lease < MinLease:
		return bad("lease", "must be at least "+MinLease.Short())
	case p.LookupGrace < 0:
		return bad("lookup_grace", "must not be negative")
	case p.LookupGrace > 0 && p.Lease-p.LookupGrace < MinCallTime:
		return bad("lookup_grace", "must leave at least "+MinCallTime.Short()+" of the lease ("+p.Lease.Short()+") for the call, got "+p.LookupGrace.Short())
	case !slices.Contains([]string{InDoubtLookup, InDoubtResend, InDoubtSkip, InDoubtManual}, p.InDoubt):
		return bad("in_doubt", "must be lookup, resend, skip or manual, got "+quoteShort(p.InDoubt))
	case !slices.Contains([]string{InDoubtResend, InDoubtSkip, InDoubtManual}, p.LookupFallback):
		return bad("lookup_fallback", "must be resend, skip or manual, got "+quoteShort(p.LookupFallback))
	case p.MaxAge < 0:
		return bad("max_age", "must not be negative")
	case math.IsNaN(p.RatePerSecond) || math.IsInf(p.RatePerSecond, 0):
		return bad("rate_per_second", "must be a finite number")
	case p.RatePerSecond < 0:
		return bad("rate_per_second", "must not be negative")
	case p.Concurrency < 1 || p.Concurrency > MaxConcurrency:
		return bad("concurrency", fmt.Sprintf("must be between 1 and %d, got %d", MaxConcurrency, p.Concurrency))
	case p.Retention < MinRetention:
		return bad("retention", "must be at least "+MinRetention.Short())
	case p.DedupeDays < 0 || p.DedupeDays > MaxDedupeDays:
		return bad("dedupe_days", fmt.Sprintf("must be 0 (the retention in whole days) to %d, got %d", MaxDedupeDays, p.DedupeDays))
	case p.DedupeDays != 0 && p.DedupeDays < p.RetentionDays():
		return bad("dedupe_days", fmt.Sprintf("must be at least the retention in whole days (%d: a key outlives its intent), or 0 for that, got %d", p.RetentionDays(), p.DedupeDays))
	case p.Sweep.Every < 0:
		return bad("sweep.every", "must not be negative")
	case p.Sweep.Every > 0 && p.Sweep.Every < MinSweepEvery:
		return bad("sweep.every", "must be 0 (off) or at least "+MinSweepEvery.Short()+", got "+p.Sweep.Every.Short())
	case p.Sweep.Every > MaxSweepWindow:
		return bad("sweep.every", "must be at most "+MaxSweepWindow.Short()+", the longest window a sweep reads, got "+p.Sweep.Every.Short())
	case p.Sweep.Window < 0:
		return bad("sweep.window", "must not be negative")
	case p.Sweep.Window > MaxSweepWindow:
		return bad("sweep.window", "must be at most "+MaxSweepWindow.Short()+", the longest window a sweep reads, got "+p.Sweep.Window.Short())
	case p.Sweep.Window > 0 && p.Sweep.Window < p.Sweep.Every:
		return bad("sweep.window", "must be at least sweep.every ("+p.Sweep.Every.Short()+") or 0 (the same), else intents created between two sweeps are never swept")
	}
	return p.validateApproval()
}

// validateApproval checks the approval fields.
func (p Policy) validateApproval() error {
	bad := func(field, msg string) error { return &PolicyError{Field: "policy." + field, Msg: msg} }
	switch {
	case p.Approval != ApprovalNone && p.Approval != ApprovalTwoPerson:
		return bad("approval", "must be none or two-person, got "+quoteShort(p.Approval))
	case p.ApprovalBulkThreshold < 1 || p.ApprovalBulkThreshold > 1_000_000:
		return bad("approval_bulk_threshold", fmt.Sprintf("must be between 1 and 1000000 rows, got %d", p.ApprovalBulkThreshold))
	case p.ApprovalExpiry < MinApprovalExpiry || p.ApprovalExpiry > MaxApprovalExpiry:
		return bad("approval_expiry", "must be between "+MinApprovalExpiry.Short()+" and "+MaxApprovalExpiry.Short()+", got "+p.ApprovalExpiry.Short())
	}
	return nil
}

// ValidateFor is Validate for a channel of provider kind: a webhook channel
// also refuses a sweep schedule, since its receiver lists nothing to sweep.
func (p Policy) ValidateFor(kind string) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if kind == "webhook" && p.Sweep.Every != 0 {
		return &PolicyError{Field: "policy.sweep.every", Msg: "a webhook channel cannot be swept (its receiver lists nothing): only stripe and twilio channels have a sweep schedule"}
	}
	return nil
}

// quoteShort quotes s for a message, cut to a few dozen bytes: a refused
// value is never echoed whole.
func quoteShort(s string) string {
	if len(s) > 40 {
		return strconv.Quote(s[:40]) + "…"
	}
	return strconv.Quote(s)
}

// Merge returns p with the fields present in layer (a JSON object) replaced;
// an object such as backoff replaces only the keys it names. Unknown fields
// and wrong types are refused, and the result is validated.
func (p Policy) Merge(layer []byte) (Policy, error) {
	dec := json.NewDecoder(bytes.NewReader(layer))
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
