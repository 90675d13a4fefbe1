-- channel_gauges.sql in the distributed mode: the same gauges per channel,
-- each an aggregate that every shard computes over its own rows in parallel
-- and the coordinator combines. The live figures read the partial indexes
-- (intents_due, intents_lease, intents_settled_rare) of every shard; the
-- deliveries are counted by reading every settled row (no trigger keeps
-- counts on a distributed table): their cost grows with the history kept.
WITH live AS (
    SELECT i.channel,
           min(i.next_attempt_at) FILTER (WHERE i.status = 'PENDING' AND i.next_attempt_at <= now() AND isfinite(i.next_attempt_at)) AS due,
           count(*) FILTER (WHERE i.status = 'SENDING' AND i.lease_expires_at < now()) AS past_lease,
           count(*) FILTER (WHERE i.status = 'IN_DOUBT') AS in_doubt,
           count(*) FILTER (WHERE i.delivery = 'accepted') AS accepted,
           count(*) FILTER (WHERE i.delivery = 'delivered') AS delivered,
           count(*) FILTER (WHERE i.delivery = 'undelivered') AS undelivered
    FROM effectd.intents i
    GROUP BY i.channel
)
SELECT c.name,
       coalesce(extract(epoch FROM now() - l.due), 0)::float8,
       coalesce(l.past_lease, 0), coalesce(l.in_doubt, 0),
       coalesce(l.accepted, 0)::bigint, coalesce(l.delivered, 0)::bigint, coalesce(l.undelivered, 0)::bigint
FROM effectd.channels c
LEFT JOIN live l ON l.channel = c.name
ORDER BY c.name
