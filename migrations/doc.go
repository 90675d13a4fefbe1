// Package migrations holds effectd's schema as embedded SQL files and applies them
// with goose under a PostgreSQL advisory lock, so several instances may migrate at once.
// After every run it copies the policy defaults that SQL reads from package policy into
// effectd.policy_defaults, so no default is spelled in SQL.
// Distribute (citus/distribute.sql) turns the schema into the distributed mode's on a Citus coordinator, and Mode
// reads which mode a database is in.
// SetProducers grants producer roles exactly what effectd.enqueue needs, each into its channels.
package migrations
