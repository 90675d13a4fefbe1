-- Reads, per channel, what an operator watches: how long the oldest due
-- PENDING intent has waited for a worker in seconds (since its
-- next_attempt_at: a row held back by not_before or a retry's backoff is not
-- late; one due since -infinity, which enqueue refuses but the table may hold,
-- is left out), SENDING rows past their lease, IN_DOUBT rows, and SENT intents
-- by delivery (accepted, delivered, undelivered).
SELECT c.name,
       coalesce(extract(epoch FROM now() - min(i.next_attempt_at)
                FILTER (WHERE i.status = 'PENDING' AND i.next_attempt_at <= now() AND isfinite(i.next_attempt_at))), 0)::float8,
       count(i.id) FILTER (WHERE i.status = 'SENDING' AND i.lease_expires_at < now()),
       count(i.id) FILTER (WHERE i.status = 'IN_DOUBT'),
       count(i.id) FILTER (WHERE i.delivery = 'accepted'),
       count(i.id) FILTER (WHERE i.delivery = 'delivered'),
       count(i.id) FILTER (WHERE i.delivery = 'undelivered')
FROM effectd.channels c LEFT JOIN effectd.intents i ON i.channel = c.name
GROUP BY c.name
ORDER BY c.name
