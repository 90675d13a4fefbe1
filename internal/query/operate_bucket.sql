-- operate.sql in the distributed mode, for an intent of bucket $6: the same
-- fenced compare-and-set, on the bucket's shard only. now() is read once in a
-- CTE: Citus refuses a function that is not IMMUTABLE in a CASE of an UPDATE
-- of a distributed table. Run it through query.Operate.
WITH t AS (SELECT now() AS now),
changed AS (
    UPDATE effectd.intents SET
        status           = $4,
        next_attempt_at  = CASE WHEN $4 = 'PENDING' THEN t.now ELSE next_attempt_at END,
        lease_expires_at = NULL,
        provider_ref     = coalesce($5, provider_ref),
        delivery         = CASE WHEN $4 = 'SENT' THEN coalesce(delivery, 'accepted') ELSE delivery END,
        delivery_at      = CASE WHEN $4 = 'SENT' AND delivery IS NULL THEN t.now ELSE delivery_at END,
        updated_at       = now()
    FROM t
    WHERE bucket = $6 AND id = $1 AND status = $2 AND attempts = $3
      AND NOT (status = 'SENDING' AND lease_expires_at > now())
    RETURNING id, event_id, channel, payload, status, attempts, next_attempt_at, lease_expires_at,
        claimed_at, idempotency_key, provider_ref, last_error, ordering_key, occurred_at, created_at, updated_at,
        delivery, delivery_detail, delivery_at
)
SELECT * FROM changed
