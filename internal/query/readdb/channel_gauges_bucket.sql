-- channel_gauges.sql in the distributed mode: the same gauges per channel,
-- without reading history. Each live figure is an aggregate that every shard
-- computes from a partial index (intents_due, intents_lease,
-- intents_settled_rare); deliveries come from the counts kept as changes
-- happen (intent_counts and intent_count_deltas, co-located with intents).
-- Every arm of the union groups by bucket (or reads a counts table whole), so
-- Citus sends the whole union to each shard as one task and the coordinator
-- combines the shards' partial figures: one round of tasks, where a CTE per
-- figure was a round each (TestCitusCountsOneRound). The three live figures
-- are one scan of intents (a BitmapOr of the partial indexes in each day
-- partition), so a task plans each day partition once (channel_counts_bucket.sql).
SELECT c.name,
       coalesce(extract(epoch FROM now() - g.due_at), 0)::float8,
       coalesce(g.past_lease, 0), coalesce(g.in_doubt, 0),
       coalesce(g.accepted, 0), coalesce(g.delivered, 0), coalesce(g.undelivered, 0)
FROM effectd.channels c
LEFT JOIN (
    SELECT channel, min(due_at) AS due_at,
           sum(past_lease)::bigint AS past_lease, sum(in_doubt)::bigint AS in_doubt,
           sum(accepted)::bigint AS accepted, sum(delivered)::bigint AS delivered,
           sum(undelivered)::bigint AS undelivered
    FROM (
        SELECT bucket, channel,
               min(next_attempt_at) FILTER (WHERE status = 'PENDING' AND next_attempt_at <= now() AND isfinite(next_attempt_at)) AS due_at,
               count(*) FILTER (WHERE status = 'SENDING' AND lease_expires_at < now()) AS past_lease,
               count(*) FILTER (WHERE status = 'IN_DOUBT') AS in_doubt,
               0::bigint AS accepted, 0::bigint AS delivered, 0::bigint AS undelivered
        FROM effectd.intents
        WHERE (status = 'PENDING' AND next_attempt_at <= now())
           OR (status = 'SENDING' AND lease_expires_at < now())
           OR status = 'IN_DOUBT'
        GROUP BY bucket, channel
        UNION ALL
        SELECT bucket, channel, NULL, 0, 0,
               CASE WHEN delivery = 'accepted' THEN n ELSE 0 END,
               CASE WHEN delivery = 'delivered' THEN n ELSE 0 END,
               CASE WHEN delivery = 'undelivered' THEN n ELSE 0 END
        FROM effectd.intent_counts
        UNION ALL
        SELECT bucket, channel, NULL, 0, 0,
               CASE WHEN delivery = 'accepted' THEN n ELSE 0 END,
               CASE WHEN delivery = 'delivered' THEN n ELSE 0 END,
               CASE WHEN delivery = 'undelivered' THEN n ELSE 0 END
        FROM effectd.intent_count_deltas
    ) AS k
    GROUP BY channel
) AS g ON g.channel = c.name
ORDER BY c.name
