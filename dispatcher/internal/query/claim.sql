WITH due AS (
    SELECT id
    FROM effectd.intents
    WHERE status = 'PENDING'
      AND channel = $1
      AND next_attempt_at <= now()
    ORDER BY next_attempt_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
UPDATE effectd.intents i
SET status           = 'SENDING',
    attempts         = i.attempts + 1,
    claimed_at       = now(),
    lease_expires_at = now() + $2::interval,
    updated_at       = now()
FROM due
WHERE i.id = due.id
RETURNING i.id, i.event_id, i.payload, i.attempts, i.idempotency_key,
          i.created_at, coalesce(i.occurred_at, i.created_at), i.claimed_at
