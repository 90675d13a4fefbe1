// Package fieldrule checks the fields of a JSON payload object the way
// effectd.enqueue's SQL rules do (migrations/002_enqueue_limits.up.sql:
// only_keys, matching, positive_int, boolean), with the same messages,
// "payload.<field>: ...". Providers state their payload shape with it; a
// table-driven test and a fuzz target in the dispatcher's tests hold the Go and
// the SQL rules to the same verdicts. It imports nothing of effectd's.
package fieldrule
