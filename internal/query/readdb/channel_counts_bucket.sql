-- channel_counts.sql in the distributed mode: counts intents by channel and
-- status, of channel $1 (NULL: every registered channel), without reading
-- history. The live states are counted exactly from their partial indexes on
-- every shard (PENDING: intents_due; SENDING: intents_lease; IN_DOUBT:
-- intents_settled_rare), whose size is the backlog; the settled states from
-- the counts that the statements of this mode keep as they change rows
-- (intent_counts and intent_count_deltas, co-located with intents). A status
-- with no row is absent.
-- Every arm of the union groups by bucket, so Citus sends the whole union to
-- each shard as one task and the coordinator adds up the shards' partial
-- sums: one round of tasks. Written as separate aggregates by channel (a CTE
-- per state), each was a round of its own over every shard
-- (TestCitusCountsOneRound). The three live states are one scan of intents
-- (a BitmapOr of the three partial indexes in each day partition): a shard's
-- task plans each day partition once, not once per state, and that planning,
-- not the rows, was most of a task's time (docs/scale.md, "Counts").
SELECT c.name, k.status, k.n
FROM effectd.channels c
JOIN (
    SELECT channel, status, sum(n)::bigint AS n
    FROM (
        SELECT bucket, channel, status, count(*) AS n
        FROM effectd.intents
        WHERE status = 'PENDING' OR (status = 'SENDING' AND lease_expires_at IS NOT NULL) OR status = 'IN_DOUBT'
        GROUP BY bucket, channel, status
        UNION ALL
        SELECT bucket, channel, status, n FROM effectd.intent_counts
        UNION ALL
        SELECT bucket, channel, status, n FROM effectd.intent_count_deltas
    ) AS k
    WHERE ($1::text IS NULL OR channel = $1)
    GROUP BY channel, status
) AS k ON k.channel = c.name
WHERE ($1::text IS NULL OR c.name = $1)
  AND k.n > 0
