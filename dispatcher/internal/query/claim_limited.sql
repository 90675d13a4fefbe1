-- Claim under the channel's shared token bucket: $4 tokens per second, at most
-- $5 saved up. The bucket row's lock serialises the claims of this channel
-- across instances; the rows claimed spend their tokens in the same statement.
WITH bucket AS (
    SELECT least($5::float8, tokens + extract(epoch FROM clock_timestamp() - at) * $4::float8) AS avail
    FROM effectd.rate_buckets
    WHERE channel = $1
    FOR UPDATE
),
due AS (
    SELECT id
    FROM effectd.intents i
    WHERE status = 'PENDING'
      AND channel = $1
      AND next_attempt_at <= now()
      AND (ordering_key IS NULL OR NOT EXISTS (
              SELECT 1 FROM effectd.intents o
              WHERE o.channel = i.channel AND o.ordering_key = i.ordering_key
                AND o.id < i.id AND o.status IN ('PENDING', 'SENDING')))
    ORDER BY next_attempt_at
    LIMIT least($3, greatest(0, (SELECT floor(avail)::int FROM bucket)))
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
    WHERE u.id = due.id
    RETURNING u.id, u.event_id, u.payload, u.attempts, u.idempotency_key,
              u.created_at, coalesce(u.occurred_at, u.created_at)
),
spent AS (
    UPDATE effectd.rate_buckets
    SET tokens = (SELECT avail FROM bucket) - (SELECT count(*) FROM claimed),
        at     = clock_timestamp()
    WHERE channel = $1
)
-- one row even when nothing was claimed, to report the tokens left
SELECT b.avail, c.* FROM bucket b LEFT JOIN claimed c ON true
