// Package policy holds a channel's Policy: how it sends, retries and settles
// its intents. It owns the defaults (the Default… constants and Default), the
// checks (Validate, whose *Error names the field), the layering of the YAML
// and the admin API's overrides over the defaults (Merge, Effective, and
// Patch for a JSON merge patch of the override; Explain for where each
// effective value comes from), and the retry delay (Backoff.Delay,
// exponential with equal jitter).
//
// The configuration, the dispatcher and the admin API read these from here;
// SQL reads the retention default from effectd.policy_defaults, which
// migrations.Up copies from DefaultRetention. Like statemachine, it imports
// no effectd package.
package policy
