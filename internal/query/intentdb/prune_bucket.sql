-- prune.sql in the distributed mode, on bucket $4: deletes up to $2 terminal
-- intents of channel $1 (never IN_DOUBT) last changed more than $3 (an
-- interval) ago, with their attempts, and counts them out of the settled
-- counts (intent_count_deltas, co-located): in this mode no trigger does.
-- Every table is restricted to the bucket, so the statement runs on its
-- shard alone (Citus refuses row locks across shards). now() is read once in
-- a CTE, as the other statements of this mode do. Returns how many intents
-- it deleted.
WITH t AS (SELECT now() - $3::interval AS cutoff),
doomed AS (
    SELECT i.id
    FROM effectd.intents i, t
    WHERE i.bucket = $4
      AND i.channel = $1
      AND i.status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')
      AND i.updated_at < t.cutoff
    LIMIT $2
    FOR UPDATE OF i SKIP LOCKED
),
gone_attempts AS (
    DELETE FROM effectd.attempts a USING doomed WHERE a.bucket = $4 AND a.intent_id = doomed.id
),
gone AS (
    DELETE FROM effectd.intents i USING doomed WHERE i.bucket = $4 AND i.id = doomed.id
    RETURNING i.created_at, i.channel, i.status, i.delivery
),
counted AS (
    INSERT INTO effectd.intent_count_deltas (bucket, day, channel, status, delivery, n)
    SELECT $4, (created_at AT TIME ZONE 'UTC')::date, channel, status, coalesce(delivery, ''), -count(*)
    FROM gone
    GROUP BY 2, 3, 4, 5
)
SELECT count(*) FROM gone
