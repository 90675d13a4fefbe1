-- take_expired.sql in the distributed mode: takes up to $1 SENDING intents
-- of channels $2 in bucket $4 whose lease expired, extending their lease by
-- $3, as one single-shard statement, and returns them. (The update is a CTE:
-- Citus plans a top-level UPDATE … FROM a CTE as separate statements.)
WITH expired AS (
    SELECT id
    FROM effectd.intents
    WHERE bucket = $4
      AND status = 'SENDING'
      AND lease_expires_at < now()
      AND channel = ANY($2::text[])
    ORDER BY lease_expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
),
taken AS (
    UPDATE effectd.intents i
    SET lease_expires_at = now() + $3::interval,
        updated_at       = now()
    FROM expired
    WHERE i.bucket = $4 AND i.id = expired.id
    RETURNING i.id, i.event_id, i.channel, i.payload, i.attempts, i.idempotency_key,
              i.created_at, coalesce(i.claimed_at, i.created_at) AS claimed_at, i.status, i.traceparent
)
SELECT * FROM taken
