-- Settles intent $1 (attempts $2, status $3: SENDING or IN_DOUBT, still with
-- idempotency key $8: a failover that lost the intent's enqueue hands its id
-- out again) as SENT with provider reference $4, fenced, and records an
-- attempt of kind callback with outcome $5. The delivery becomes $6 with detail $7 ('' =
-- none) in the same statement, so the notification of SENT tells it; $6 = ''
-- leaves it as it is. Returns the intent id, or no row when fenced out.
WITH updated AS (
    UPDATE effectd.intents
    SET status           = 'SENT',
        provider_ref     = $4,
        lease_expires_at = NULL,
        delivery         = coalesce(nullif($6, ''), delivery),
        delivery_detail  = CASE WHEN $6 <> '' THEN nullif($7, '') ELSE delivery_detail END,
        delivery_at      = CASE WHEN $6 <> '' THEN now() ELSE delivery_at END,
        updated_at       = now()
    WHERE id = $1 AND idempotency_key = $8 AND status = $3 AND attempts = $2
    RETURNING id
)
INSERT INTO effectd.attempts (intent_id, attempt, kind, started_at, finished_at, outcome, error, provider_ref)
SELECT $1, $2, 'callback', now(), now(), $5, NULL, $4
FROM updated
RETURNING intent_id
