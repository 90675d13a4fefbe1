WITH due AS (
    SELECT id
    FROM effectd.intents i
    WHERE status = 'PENDING'
      AND channel = $1
      AND next_attempt_at <= now()
      -- an intent waits while an older one with its ordering key is unsettled
      AND (ordering_key IS NULL OR NOT EXISTS (
              SELECT 1 FROM effectd.intents o
              WHERE o.channel = i.channel AND o.ordering_key = i.ordering_key
                AND o.id < i.id AND o.status IN ('PENDING', 'SENDING')))
    ORDER BY next_attempt_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
UPDATE effectd.intents u
SET status           = 'SENDING',
    attempts         = u.attempts + 1,
    claimed_at       = now(),
    lease_expires_at = now() + $2::interval,
    updated_at       = now()
FROM due
WHERE u.id = due.id
RETURNING u.id, u.event_id, u.payload, u.attempts, u.idempotency_key,
          u.created_at, coalesce(u.occurred_at, u.created_at)
