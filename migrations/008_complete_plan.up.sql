-- +goose Up
-- A completion batch finds its rows by id and fences each on status =
-- 'SENDING'. That predicate alone implied intents_lease's, so when the
-- statistics said no row was SENDING (an ANALYZE of a table whose rows were all
-- PENDING, or all settled) the planner read the whole of intents_lease for
-- each batch instead of looking the ids up in the primary key: every intent
-- claimed since the last vacuum leaves an entry there, and a 100,000 backlog
-- drained at half speed, PostgreSQL's CPU per intent four times as high.
-- intents_lease now also requires a lease. The reconciler's
-- lease_expires_at < now() implies it, so the reconciler still reads this
-- index, and finds the same rows (a SENDING row without a lease never matched
-- that condition); a completion's status = 'SENDING' no longer implies it.
DROP INDEX effectd.intents_lease;
CREATE INDEX intents_lease ON effectd.intents (lease_expires_at)
    WHERE status = 'SENDING' AND lease_expires_at IS NOT NULL;
