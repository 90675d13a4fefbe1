-- Takes up to $1 SENDING intents of channels $2 whose lease expired, by
-- extending their lease by $3 (an interval) so that one reconciler settles
-- each, and returns them. As in claim.sql, the limit is a scalar subquery, so
-- the generic plan is kept rather than the statement planned again over every
-- day partition at each poll, and the update finds its rows by their ids with
-- created_at bounded by theirs, so only their days are read
-- (TestTakeExpiredReadsOnlyItsDays).
WITH expired AS (
    SELECT id, created_at
    FROM effectd.intents
    WHERE status = 'SENDING'
      AND lease_expires_at < now()
      AND channel = ANY($2::text[])
    ORDER BY lease_expires_at
    LIMIT (SELECT $1::int)
    FOR UPDATE SKIP LOCKED
)
UPDATE effectd.intents i
SET lease_expires_at = now() + $3::interval,
    updated_at       = now()
WHERE i.id = ANY (ARRAY(SELECT id FROM expired))
  AND i.created_at >= (SELECT min(created_at) FROM expired)
  AND i.created_at <= (SELECT max(created_at) FROM expired)
RETURNING i.id, i.event_id, i.channel, i.payload, i.attempts, i.idempotency_key,
          i.created_at, coalesce(i.claimed_at, i.created_at), i.status, i.traceparent
