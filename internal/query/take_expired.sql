-- Takes up to $1 SENDING intents of channels $2 whose lease expired, by
-- extending their lease by $3 (an interval) so that one reconciler settles
-- each, and returns them.
WITH expired AS (
    SELECT id
    FROM effectd.intents
    WHERE status = 'SENDING'
      AND lease_expires_at < now()
      AND channel = ANY($2::text[])
    ORDER BY lease_expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE effectd.intents i
SET lease_expires_at = now() + $3::interval,
    updated_at       = now()
FROM expired
WHERE i.id = expired.id
RETURNING i.id, i.event_id, i.channel, i.payload, i.attempts, i.idempotency_key,
          i.created_at, coalesce(i.claimed_at, i.created_at), i.status
