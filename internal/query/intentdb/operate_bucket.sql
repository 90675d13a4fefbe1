-- operate.sql in the distributed mode, for an intent of bucket $6 with
-- idempotency key $7: the same fenced compare-and-set, on the bucket's shard
-- only. now() is read once in a
-- CTE: Citus refuses a function that is not IMMUTABLE in a CASE of an UPDATE
-- of a distributed table. In this mode no trigger keeps the settled counts:
-- the row is read and locked first (old: its delivery, which a provider event
-- may change at any time), so the change it makes to the counts is written
-- exactly, in the same statement (intent_count_deltas, co-located), with the
-- producer's notification of the outcome (notified). Run it through
-- query.Operate.
WITH t AS (SELECT now() AS now),
old AS (
    SELECT id, delivery
    FROM effectd.intents
    WHERE bucket = $6 AND id = $1 AND status = $2 AND attempts = $3
      AND idempotency_key = $7
    FOR UPDATE
),
changed AS (
    UPDATE effectd.intents i SET
        status           = $4,
        next_attempt_at  = CASE WHEN $4 = 'PENDING' THEN t.now ELSE i.next_attempt_at END,
        lease_expires_at = NULL,
        provider_ref     = coalesce($5, i.provider_ref),
        delivery         = CASE WHEN $4 = 'SENT' THEN coalesce(i.delivery, 'accepted') ELSE i.delivery END,
        delivery_at      = CASE WHEN $4 = 'SENT' AND i.delivery IS NULL THEN t.now ELSE i.delivery_at END,
        updated_at       = now()
    FROM t, old
    WHERE i.bucket = $6 AND i.id = old.id AND i.status = $2 AND i.attempts = $3
      AND NOT (i.status = 'SENDING' AND i.lease_expires_at > now())
    RETURNING i.id, i.event_id, i.channel, i.payload, i.status, i.attempts, i.next_attempt_at, i.lease_expires_at,
        i.claimed_at, i.idempotency_key, i.provider_ref, i.last_error, i.ordering_key, i.occurred_at, i.created_at, i.updated_at,
        i.delivery, i.delivery_detail, i.delivery_at, old.delivery AS old_delivery, i.traceparent,
        i.status <> $2 AS status_moved, i.delivery IS DISTINCT FROM old.delivery AS delivery_moved
),
-- the settled counts: the row leaves ($2, its delivery before) and enters ($4,
-- its delivery after), each counted when settled, under its UTC day and channel
counted AS (
    INSERT INTO effectd.intent_count_deltas (bucket, day, channel, status, delivery, n)
    SELECT $6, d.day, d.channel, d.status, d.delivery, sum(d.n)
    FROM (SELECT (created_at AT TIME ZONE 'UTC')::date AS day, channel, status, coalesce(delivery, '') AS delivery, 1 AS n
          FROM changed
          UNION ALL
          SELECT (created_at AT TIME ZONE 'UTC')::date, channel, $2, coalesce(old_delivery, ''), -1
          FROM changed) AS d
    WHERE d.status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')
    GROUP BY d.day, d.channel, d.status, d.delivery
    HAVING sum(d.n) <> 0
),
-- the minute rollups (rollups_bucket.sql): the row was $2
{{rollups "changed" 6 "$2::text"}},
-- the producer's notifications (notices_bucket.sql)
{{notices "changed" 6}}
SELECT id, event_id, channel, payload, status, attempts, next_attempt_at, lease_expires_at,
    claimed_at, idempotency_key, provider_ref, last_error, ordering_key, occurred_at, created_at, updated_at,
    delivery, delivery_detail, delivery_at
FROM changed
