// Package migrations holds effectd's schema as embedded SQL files. A Migrator,
// built once on a pool (New), applies them with goose under a PostgreSQL
// advisory lock, so several instances may migrate at once (Up); after every
// run it copies the policy defaults that SQL reads from package policy into
// effectd.policy_defaults, so no default is spelled in SQL. Its Distribute
// (citus/distribute.sql) turns the schema into the distributed mode's on a
// Citus coordinator, and its SetProducers grants producer roles exactly what
// effectd.enqueue needs, each into its channels. Current and Mode read, on
// any connection, whether the schema is current and which mode a database
// is in.
package migrations
