-- channel_counts_bucket.sql and channel_gauges_bucket.sql in one round of
-- tasks: what GET /v1/stats shows, every registered channel's counts by status
-- and its gauges, in the distributed mode. One row per channel and status
-- (status NULL: a channel with no intent): the intents in that status (n), the
-- age in seconds of its oldest due PENDING intent (PENDING rows only, else 0),
-- its SENDING intents past their lease, and its settled intents by delivery.
-- The live states are one scan of intents per shard (a BitmapOr of the three
-- partial indexes in each day partition), the settled ones the counts kept as
-- changes happen; every arm groups by bucket, or reads a counts table whole,
-- so Citus sends the whole union to each shard as one task (query.Figures;
-- TestCitusCountsOneRound). Read as two statements, stats paid a round of
-- tasks for each, and a task's cost is mostly planning its shard's day
-- partitions.
SELECT c.name, k.status, coalesce(k.n, 0),
       coalesce(extract(epoch FROM now() - k.due_at), 0)::float8,
       coalesce(k.past_lease, 0), coalesce(k.accepted, 0), coalesce(k.delivered, 0), coalesce(k.undelivered, 0)
FROM effectd.channels c
LEFT JOIN (
    SELECT channel, status, sum(n)::bigint AS n, min(due_at) AS due_at,
           sum(past_lease)::bigint AS past_lease, sum(accepted)::bigint AS accepted,
           sum(delivered)::bigint AS delivered, sum(undelivered)::bigint AS undelivered
    FROM (
        SELECT bucket, channel, status, count(*) AS n,
               min(next_attempt_at) FILTER (WHERE status = 'PENDING' AND next_attempt_at <= now() AND isfinite(next_attempt_at)) AS due_at,
               count(*) FILTER (WHERE status = 'SENDING' AND lease_expires_at < now()) AS past_lease,
               0::bigint AS accepted, 0::bigint AS delivered, 0::bigint AS undelivered
        FROM effectd.intents
        WHERE status = 'PENDING' OR (status = 'SENDING' AND lease_expires_at IS NOT NULL) OR status = 'IN_DOUBT'
        GROUP BY bucket, channel, status
        UNION ALL
        SELECT bucket, channel, status, n, NULL, 0,
               CASE WHEN delivery = 'accepted' THEN n ELSE 0 END,
               CASE WHEN delivery = 'delivered' THEN n ELSE 0 END,
               CASE WHEN delivery = 'undelivered' THEN n ELSE 0 END
        FROM effectd.intent_counts
        UNION ALL
        SELECT bucket, channel, status, n, NULL, 0,
               CASE WHEN delivery = 'accepted' THEN n ELSE 0 END,
               CASE WHEN delivery = 'delivered' THEN n ELSE 0 END,
               CASE WHEN delivery = 'undelivered' THEN n ELSE 0 END
        FROM effectd.intent_count_deltas
    ) AS k
    GROUP BY channel, status
) AS k ON k.channel = c.name
ORDER BY c.name, k.status
