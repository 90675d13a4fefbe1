-- Applies one reconciler or lookup decision to intent $1 (attempt $2, still
-- with idempotency key $9: a failover that lost the intent's enqueue hands its
-- id out again) as a fenced compare-and-set from status $3 to $4, with provider reference $5 and
-- error $6 when not NULL, and records it as an attempt of kind lookup started
-- at $7 with outcome $8 (after the attempt the lease expired on, when that one
-- left no row). Returns 1 when applied, 0 when fenced out. Run it through
-- query.Settle; an operator's reconcile writes its audit entry in the same
-- transaction (query.WriteAudit).
WITH updated AS (
    UPDATE effectd.intents
    SET status           = $4,
        provider_ref     = coalesce($5, provider_ref),
        last_error       = coalesce($6, last_error),
        next_attempt_at  = CASE WHEN $4 = 'PENDING' THEN now() ELSE next_attempt_at END,
        lease_expires_at = NULL,
        -- found at the provider: accepted, until its events or a poll say more
        delivery         = CASE WHEN $4 = 'SENT' THEN coalesce(delivery, 'accepted') ELSE delivery END,
        delivery_at      = CASE WHEN $4 = 'SENT' AND delivery IS NULL THEN now() ELSE delivery_at END,
        updated_at       = now()
    WHERE id = $1 AND idempotency_key = $9 AND status = $3 AND attempts = $2
    RETURNING id, claimed_at, channel
),
recorded AS (
    INSERT INTO effectd.attempts (intent_id, attempt, kind, started_at, finished_at, outcome, error, provider_ref)
    SELECT $1, $2, r.kind, r.started_at, r.finished_at, r.outcome, r.error, r.provider_ref
    FROM updated, LATERAL (
        -- the call whose lease expired, when it left no attempt row of its own
        SELECT 1 AS ord, 'send' AS kind, coalesce(updated.claimed_at, now()) AS started_at, NULL::timestamptz AS finished_at,
               'lease expired' AS outcome, 'no outcome recorded before the lease expired' AS error, NULL AS provider_ref
        WHERE $3 = 'SENDING'
          AND NOT EXISTS (SELECT 1 FROM effectd.attempts a WHERE a.intent_id = $1 AND a.attempt = $2 AND a.kind = 'send')
        UNION ALL
        -- the settlement itself
        SELECT 2, 'lookup', $7::timestamptz, now(), $8, $6, $5
    ) r
    ORDER BY r.ord
)
SELECT count(*) FROM updated
