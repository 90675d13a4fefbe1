// Package policy holds the layering of a channel's Policy: Effective (the
// defaults, then the YAML, then the admin API's override), Patch for a JSON
// merge patch of the override (with github.com/evanphx/json-patch), and
// Explain for where each effective value comes from.
//
// The Policy itself, with its defaults (the Default… constants and Default),
// its checks (Validate, whose *Error names the field), Merge and the retry
// delay (Backoff.Delay, exponential with equal jitter), is declared in
// effectdtype, the leaf of shared types that imports only the standard
// library, and named here too by aliases, so that policy.Policy and
// effectdtype.Policy are one type.
//
// The configuration, the dispatcher and the admin API read these from here;
// SQL reads the retention default from effectd.policy_defaults, which
// migrations.Migrator.Up copies from DefaultRetention.
package policy
