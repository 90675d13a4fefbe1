-- Deletes up to $2 terminal intents of channel $1 (never IN_DOUBT) last
-- changed more than $3 (an interval) ago, with their attempts.
WITH doomed AS (
    SELECT id
    FROM effectd.intents
    WHERE channel = $1
      AND status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')
      AND updated_at < now() - $3::interval
    LIMIT $2
    FOR UPDATE SKIP LOCKED
),
gone_attempts AS (
    DELETE FROM effectd.attempts a USING doomed WHERE a.intent_id = doomed.id
)
DELETE FROM effectd.intents i USING doomed WHERE i.id = doomed.id
