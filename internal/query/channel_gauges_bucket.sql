-- channel_gauges.sql in the distributed mode: the same gauges per channel,
-- without reading history. Each live figure is an aggregate that every shard
-- computes from a partial index (intents_due, intents_lease,
-- intents_settled_rare) and the coordinator combines; deliveries come from the
-- counts kept as changes happen (intent_counts and intent_count_deltas,
-- co-located with intents).
WITH due AS (
    SELECT channel, min(next_attempt_at) AS at
    FROM effectd.intents
    WHERE status = 'PENDING' AND next_attempt_at <= now() AND isfinite(next_attempt_at)
    GROUP BY channel
),
past_lease AS (
    SELECT channel, count(*) AS n
    FROM effectd.intents WHERE status = 'SENDING' AND lease_expires_at < now()
    GROUP BY channel
),
in_doubt AS (
    SELECT channel, count(*) AS n
    FROM effectd.intents WHERE status = 'IN_DOUBT'
    GROUP BY channel
),
deliveries AS (
    SELECT channel,
           sum(n) FILTER (WHERE delivery = 'accepted')    AS accepted,
           sum(n) FILTER (WHERE delivery = 'delivered')   AS delivered,
           sum(n) FILTER (WHERE delivery = 'undelivered') AS undelivered
    FROM (SELECT bucket, channel, delivery, n FROM effectd.intent_counts
          UNION ALL
          SELECT bucket, channel, delivery, n FROM effectd.intent_count_deltas) AS k
    GROUP BY channel
)
SELECT c.name,
       coalesce(extract(epoch FROM now() - u.at), 0)::float8,
       coalesce(p.n, 0), coalesce(q.n, 0),
       coalesce(d.accepted, 0)::bigint, coalesce(d.delivered, 0)::bigint, coalesce(d.undelivered, 0)::bigint
FROM effectd.channels c
LEFT JOIN due u ON u.channel = c.name
LEFT JOIN past_lease p ON p.channel = c.name
LEFT JOIN in_doubt q ON q.channel = c.name
LEFT JOIN deliveries d ON d.channel = c.name
ORDER BY c.name
