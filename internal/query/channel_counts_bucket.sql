-- channel_counts.sql in the distributed mode: counts intents by channel and
-- status, of channel $1 (NULL: every registered channel), without reading
-- history. The live states are counted exactly from their partial indexes on
-- every shard (PENDING: intents_due; SENDING: intents_lease; IN_DOUBT:
-- intents_settled_rare), whose size is the backlog; the settled states from
-- the counts that the statements of this mode keep as they change rows
-- (intent_counts and intent_count_deltas, co-located with intents: bucket in
-- both arms lets each shard add up its own counts and deltas together). A
-- status with no row is absent.
WITH live AS (
    SELECT channel, 'PENDING' AS status, count(*) AS n
    FROM effectd.intents WHERE status = 'PENDING' AND ($1::text IS NULL OR channel = $1)
    GROUP BY channel
    UNION ALL
    SELECT channel, 'SENDING', count(*)
    FROM effectd.intents WHERE status = 'SENDING' AND lease_expires_at IS NOT NULL AND ($1::text IS NULL OR channel = $1)
    GROUP BY channel
    UNION ALL
    SELECT channel, 'IN_DOUBT', count(*)
    FROM effectd.intents WHERE status = 'IN_DOUBT' AND ($1::text IS NULL OR channel = $1)
    GROUP BY channel
),
settled AS (
    SELECT channel, status, sum(n)::bigint AS n
    FROM (SELECT bucket, channel, status, n FROM effectd.intent_counts
          UNION ALL
          SELECT bucket, channel, status, n FROM effectd.intent_count_deltas) AS k
    WHERE ($1::text IS NULL OR channel = $1)
    GROUP BY channel, status
)
SELECT c.name, s.status, s.n
FROM effectd.channels c
JOIN (SELECT channel, status, n FROM live UNION ALL SELECT channel, status, n FROM settled) AS s ON s.channel = c.name
WHERE ($1::text IS NULL OR c.name = $1)
  AND s.n > 0
