-- Claim up to $3 due PENDING intents of channel $1 and move them to SENDING
-- under a lease of $2. A rate-limited channel ($4 tokens a second, at most $5
-- saved up) claims under its rate tokens, shared by every instance: the tokens'
-- row's lock serialises the channel's claims, and the rows claimed spend their
-- tokens in this statement. An unlimited channel ($4 = 0) touches no tokens.
-- Each claimed row comes with the tokens that were available; when nothing was
-- claimed one row reports them, with id 0.
-- A paused channel claims nothing: the claim reads the pause flag under a share
-- lock, so it waits for a pause being committed and then sees it (READ COMMITTED
-- rereads a locked row's newest version), and a pause waits for a claim that
-- read the flag first. Once a pause has committed, no claim takes a row.
-- The limit is a scalar subquery, which no plan can read: PostgreSQL then
-- keeps the generic plan instead of planning each claim again, and the update
-- finds the claimed rows by an array of ids (TestClaimKeepsGenericPlan).
-- The update also bounds created_at by the claimed rows' oldest and newest, so
-- it reads only the day partitions that hold them, the others pruned once the
-- rows are known: by id alone, every partition's primary key was searched for
-- every claimed id (TestClaimReadsOnlyClaimedDays).
WITH rate AS (
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
    SELECT id, created_at
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
    LIMIT (SELECT CASE WHEN $4::float8 > 0 THEN least($3, greatest(0, (SELECT floor(avail)::int FROM rate))) ELSE $3 END)
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
      AND u.created_at >= (SELECT min(created_at) FROM due)
      AND u.created_at <= (SELECT max(created_at) FROM due)
    RETURNING u.id, u.event_id, u.payload, u.attempts, u.idempotency_key,
              u.created_at, coalesce(u.occurred_at, u.created_at) AS occurred_at, u.traceparent
),
spent AS (
    UPDATE effectd.rate_buckets
    SET tokens = (SELECT avail FROM rate) - (SELECT count(*) FROM claimed),
        at     = clock_timestamp()
    WHERE channel = $1 AND $4::float8 > 0
)
SELECT coalesce((SELECT avail FROM rate), 0), c.id, c.event_id, c.payload, c.attempts, c.idempotency_key,
       c.created_at, c.occurred_at, c.traceparent
FROM claimed c
UNION ALL
SELECT r.avail, 0, '', NULL, 0, '', now(), now(), NULL
FROM rate r
WHERE NOT EXISTS (SELECT 1 FROM claimed)
