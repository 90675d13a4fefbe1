package policy

import "github.com/effectd/effectd/effectdtype"

// The policy's types, declared in effectdtype with their checks (Validate,
// ValidateFor), their layering (Merge), their JSON and YAML forms and the
// retry delay (Backoff.Delay), and named here too.
type (
	// Policy is how a channel sends, retries and settles its intents.
	Policy = effectdtype.Policy
	// Backoff is the exponential retry delay with equal jitter.
	Backoff = effectdtype.Backoff
	// Duration is a time.Duration written as "30s" or "10m" in YAML and JSON.
	Duration = effectdtype.Duration
	// PollDelays are the delays after SENT at which a delivery is polled.
	PollDelays = effectdtype.PollDelays
	// SweepSchedule schedules a channel's reconciliation sweep.
	SweepSchedule = effectdtype.SweepSchedule
	// Error is an invalid policy; Field names the field as policy.<field>.
	Error = effectdtype.PolicyError
)

// In-doubt policies: what the reconciler does with a call whose lease expired.
const (
	InDoubtLookup = effectdtype.InDoubtLookup // ask the provider
	InDoubtResend = effectdtype.InDoubtResend // send again (risk: a duplicate)
	InDoubtSkip   = effectdtype.InDoubtSkip   // do not send (risk: a gap)
	InDoubtManual = effectdtype.InDoubtManual // IN_DOUBT: hand to an operator
)

// Approval modes: who decides an operator's risky action on a channel.
const (
	ApprovalNone      = effectdtype.ApprovalNone      // the operator alone
	ApprovalTwoPerson = effectdtype.ApprovalTwoPerson // a request another person with the approve right decides
)

// The defaults of a channel whose YAML says nothing (effectdtype's).
const (
	DefaultMaxAttempts           = effectdtype.DefaultMaxAttempts
	DefaultBackoffBase           = effectdtype.DefaultBackoffBase
	DefaultBackoffMax            = effectdtype.DefaultBackoffMax
	DefaultLease                 = effectdtype.DefaultLease
	DefaultInDoubt               = effectdtype.DefaultInDoubt
	DefaultWebhookInDoubt        = effectdtype.DefaultWebhookInDoubt
	DefaultLookupFallback        = effectdtype.DefaultLookupFallback
	DefaultConcurrency           = effectdtype.DefaultConcurrency
	DefaultRetention             = effectdtype.DefaultRetention
	DefaultApproval              = effectdtype.DefaultApproval
	DefaultApprovalBulkThreshold = effectdtype.DefaultApprovalBulkThreshold
	DefaultApprovalExpiry        = effectdtype.DefaultApprovalExpiry
)

// The bounds Validate holds a policy to (effectdtype's).
const (
	MinApprovalExpiry = effectdtype.MinApprovalExpiry
	MaxApprovalExpiry = effectdtype.MaxApprovalExpiry
	MinLease          = effectdtype.MinLease
	MinCallTime       = effectdtype.MinCallTime
	MaxConcurrency    = effectdtype.MaxConcurrency
	MinRetention      = effectdtype.MinRetention
	MinSweepEvery     = effectdtype.MinSweepEvery
	MaxDedupeDays     = effectdtype.MaxDedupeDays
	MaxSweepWindow    = effectdtype.MaxSweepWindow
	MaxPollDelays     = effectdtype.MaxPollDelays
)

// Default returns the policy of a channel of provider kind whose YAML says
// nothing: the Default constants, with in_doubt resend for a webhook.
func Default(kind string) Policy { return effectdtype.DefaultPolicy(kind) }
