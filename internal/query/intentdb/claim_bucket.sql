-- claim.sql in the distributed mode: claims up to $3 due PENDING intents of
-- channel $1 in bucket $4 and moves them to SENDING under a lease of $2, as
-- one single-shard statement (every table read is bucket $4's shard of a
-- co-located table, or the worker's copy of the reference table channels):
-- Citus runs FOR UPDATE SKIP LOCKED only so. The rate limit is not here:
-- rate_buckets stays on the coordinator, and query.ClaimBucket takes and
-- spends its tokens around this statement in the same transaction. The pause
-- is read under a share lock as in claim.sql (an UPDATE of a reference table
-- locks the row on every node). The update is a CTE: Citus plans a top-level
-- UPDATE … FROM a CTE as separate statements, and this one as a single task.
-- Intents that share an ordering key wait for
-- older ones of the same bucket: give them the same bucket.
WITH unpaused AS (
    SELECT name
    FROM effectd.channels
    WHERE name = $1 AND NOT paused
    FOR SHARE
),
due AS (
    SELECT id
    FROM effectd.intents i
    WHERE bucket = $4
      AND status = 'PENDING'
      AND channel = $1
      AND next_attempt_at <= now()
      AND EXISTS (SELECT 1 FROM unpaused)
      AND (ordering_key IS NULL OR NOT EXISTS (
              SELECT 1 FROM effectd.intents o
              WHERE o.bucket = $4 AND o.channel = i.channel AND o.ordering_key = i.ordering_key
                AND o.id < i.id AND o.status IN ('PENDING', 'SENDING')))
    ORDER BY next_attempt_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE effectd.intents u
    SET status           = 'SENDING',
        attempts         = u.attempts + 1,
        claimed_at       = now(),
        lease_expires_at = now() + $2::interval,
        updated_at       = now()
    FROM due
    WHERE u.bucket = $4 AND u.id = due.id
    RETURNING u.id, u.event_id, u.payload, u.attempts, u.idempotency_key,
              u.created_at, coalesce(u.occurred_at, u.created_at) AS occurred_at, u.traceparent
)
SELECT * FROM claimed
