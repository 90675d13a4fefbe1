WITH updated AS (
    UPDATE effectd.intents
    SET status           = $4,
        provider_ref     = coalesce($5, provider_ref),
        last_error       = coalesce($6, last_error),
        next_attempt_at  = CASE WHEN $4 = 'PENDING' THEN now() ELSE next_attempt_at END,
        lease_expires_at = NULL,
        updated_at       = now()
    WHERE id = $1 AND status = $3 AND attempts = $2
    RETURNING id, claimed_at
),
lost AS (
    -- the call whose lease expired left no attempt row of its own: record it
    INSERT INTO effectd.attempts (intent_id, attempt, kind, started_at, outcome, error)
    SELECT $1, $2, 'send', coalesce(updated.claimed_at, now()), 'lease expired', 'no outcome recorded before the lease expired'
    FROM updated
    WHERE $3 = 'SENDING'
      AND NOT EXISTS (SELECT 1 FROM effectd.attempts a WHERE a.intent_id = $1 AND a.attempt = $2 AND a.kind = 'send')
),
recorded AS (
    INSERT INTO effectd.attempts (intent_id, attempt, kind, started_at, finished_at, outcome, error, provider_ref)
    SELECT $1, $2, 'lookup', $7, now(), $8, $6, $5
    FROM updated
)
SELECT count(*) FROM updated
