-- Reads, per channel, what an operator watches: how long the oldest due
-- PENDING intent has waited for a worker in seconds (since its
-- next_attempt_at: a row held back by not_before or a retry's backoff is not
-- late; one due since -infinity, which enqueue refuses but the table may hold,
-- is left out), SENDING rows past their lease, IN_DOUBT rows, and settled
-- intents by delivery (accepted, delivered, undelivered). Each live figure is
-- one probe of a partial index (intents_due, intents_lease,
-- intents_settled_rare); deliveries come from the counts kept as changes
-- happen. Nothing here reads history.
WITH deliveries AS (
    SELECT channel,
           sum(n) FILTER (WHERE delivery = 'accepted')    AS accepted,
           sum(n) FILTER (WHERE delivery = 'delivered')   AS delivered,
           sum(n) FILTER (WHERE delivery = 'undelivered') AS undelivered
    FROM (SELECT channel, delivery, n FROM effectd.intent_counts
          UNION ALL
          SELECT channel, delivery, n FROM effectd.intent_count_deltas) AS k
    GROUP BY channel
)
SELECT c.name,
       coalesce(extract(epoch FROM now() - (
           SELECT min(i.next_attempt_at) FROM effectd.intents i
           WHERE i.status = 'PENDING' AND i.channel = c.name
             AND i.next_attempt_at <= now() AND isfinite(i.next_attempt_at))), 0)::float8,
       (SELECT count(*) FROM effectd.intents i
        WHERE i.status = 'SENDING' AND i.lease_expires_at < now() AND i.channel = c.name),
       (SELECT count(*) FROM effectd.intents i WHERE i.status = 'IN_DOUBT' AND i.channel = c.name),
       coalesce(d.accepted, 0)::bigint, coalesce(d.delivered, 0)::bigint, coalesce(d.undelivered, 0)::bigint
FROM effectd.channels c
LEFT JOIN deliveries d ON d.channel = c.name
ORDER BY c.name
