-- Claim up to $3 due PENDING intents of channel $1 and move them to SENDING
-- under a lease of $2. A rate-limited channel ($4 tokens a second, at most $5
-- saved up) claims under its token bucket, shared by every instance: the bucket
-- row's lock serialises the channel's claims, and the rows claimed spend their
-- tokens in this statement. An unlimited channel ($4 = 0) touches no bucket.
-- Each claimed row comes with the tokens that were available; when nothing was
-- claimed one row reports them, with id 0.
-- A paused channel claims nothing: the claim reads the pause flag under a share
-- lock, so it waits for a pause being committed and then sees it (READ COMMITTED
-- rereads a locked row's newest version), and a pause waits for a claim that
-- read the flag first. Once a pause has committed, no claim takes a row.
-- The limit is a scalar subquery so that no plan knows it: a plan made for
-- the statement's values (a custom plan) then costs what the generic plan
-- does, and PostgreSQL keeps the generic one after five executions instead of
-- planning every claim again over every partition and index (a claim takes no
-- partition key to prune by). Both read intents_due in next_attempt_at order.
-- Such a plan cannot tell how many rows are due (it guesses a tenth of the
-- PENDING rows), so the update finds the claimed rows by an array of ids, which
-- the planner looks up through each partition's primary key whatever it
-- guesses, rather than by a join it might make with a scan of the partition.
WITH bucket AS (
    SELECT least($5::float8, tokens + extract(epoch FROM clock_timestamp() - at) * $4::float8) AS avail
    FROM effectd.rate_buckets
    WHERE channel = $1 AND $4::float8 > 0
    FOR UPDATE
),
unpaused AS (
    SELECT name
    FROM effectd.channels
    WHERE name = $1 AND NOT paused
    FOR SHARE
),
due AS (
    SELECT id
    FROM effectd.intents i
    WHERE status = 'PENDING'
      AND channel = $1
      AND next_attempt_at <= now()
      AND EXISTS (SELECT 1 FROM unpaused)
      -- an intent waits while an older one with its ordering key is unsettled
      AND (ordering_key IS NULL OR NOT EXISTS (
              SELECT 1 FROM effectd.intents o
              WHERE o.channel = i.channel AND o.ordering_key = i.ordering_key
                AND o.id < i.id AND o.status IN ('PENDING', 'SENDING')))
    ORDER BY next_attempt_at
    LIMIT (SELECT CASE WHEN $4::float8 > 0 THEN least($3, greatest(0, (SELECT floor(avail)::int FROM bucket))) ELSE $3 END)
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE effectd.intents u
    SET status           = 'SENDING',
        attempts         = u.attempts + 1,
        claimed_at       = now(),
        lease_expires_at = now() + $2::interval,
        updated_at       = now()
    WHERE u.id = ANY (ARRAY(SELECT id FROM due))
    RETURNING u.id, u.event_id, u.payload, u.attempts, u.idempotency_key,
              u.created_at, coalesce(u.occurred_at, u.created_at) AS occurred_at
),
spent AS (
    UPDATE effectd.rate_buckets
    SET tokens = (SELECT avail FROM bucket) - (SELECT count(*) FROM claimed),
        at     = clock_timestamp()
    WHERE channel = $1 AND $4::float8 > 0
)
SELECT coalesce((SELECT avail FROM bucket), 0), c.id, c.event_id, c.payload, c.attempts, c.idempotency_key,
       c.created_at, c.occurred_at
FROM claimed c
UNION ALL
SELECT b.avail, 0, '', NULL, 0, '', now(), now()
FROM bucket b
WHERE NOT EXISTS (SELECT 1 FROM claimed)
