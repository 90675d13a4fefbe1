-- set_delivery.sql in the distributed mode, for an intent of bucket $5:
-- moves intent $1's delivery from $2 ('' = unknown) to $3 with detail $4
-- ('' = none), as a compare-and-set, in one single-shard statement that also
-- counts the move (counted) and writes the producer's notification of it
-- (notified, as in complete_bucket.sql). The row returned tells what moved: the intent's
-- bucket, created_at, channel, status (unchanged), old and new delivery. No
-- row: the delivery was no longer $2.
WITH updated AS (
    UPDATE effectd.intents
    SET delivery        = $3,
        delivery_detail = nullif($4, ''),
        delivery_at     = now(),
        updated_at      = now()
    WHERE bucket = $5 AND id = $1 AND coalesce(delivery, '') = $2
    RETURNING bucket, created_at, channel, status, $2::text AS old_delivery, delivery,
              id, event_id, delivery_detail, provider_ref, last_error, idempotency_key,
              -- the payload only where a copied error is to be masked (notices): the
              -- rows come back to the coordinator
              CASE WHEN last_error <> '' THEN payload END AS payload,
              false AS status_moved, coalesce(delivery, '') <> $2::text AS delivery_moved
),
-- the move, counted when settled (the old state and delivery -1, the new +1)
-- under the intent's UTC day and channel, on its shard (docs/scale.md, "Counts")
counted AS (
    INSERT INTO effectd.intent_count_deltas (bucket, day, channel, status, delivery, n)
    SELECT $5, d.day, d.channel, d.status, d.delivery, sum(d.n)
    FROM (SELECT (created_at AT TIME ZONE 'UTC')::date AS day, channel, status, coalesce(delivery, '') AS delivery, 1 AS n
          FROM updated
          UNION ALL
          SELECT (created_at AT TIME ZONE 'UTC')::date, channel, status, old_delivery, -1
          FROM updated) AS d
    WHERE d.status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')
    GROUP BY d.day, d.channel, d.status, d.delivery
    HAVING sum(d.n) <> 0
),
-- the producer's notifications, as on one PostgreSQL (complete_bucket.sql)
outcomes AS (
    SELECT id, 1 AS ord, lower(status) AS outcome FROM updated WHERE status_moved
    UNION ALL
    SELECT id, 2, delivery FROM updated WHERE delivery_moved
),
notices AS (
    SELECT x.* FROM (
        SELECT u.id, o.ord, u.idempotency_key AS key, c.notify ->> 'channel' AS target, tc.max_payload,
               effectd.notify_key(u.idempotency_key, o.outcome) AS event_id,
               jsonb_build_object('type', 'effect.' || o.outcome, 'intent', jsonb_build_object(
                   'id', u.id, 'event_id', u.event_id, 'channel', u.channel, 'status', u.status,
                   'delivery', u.delivery, 'delivery_detail', u.delivery_detail, 'provider_ref', u.provider_ref,
                   'last_error', effectd.redact_text(u.last_error, u.payload, c.redact))) AS payload
        FROM updated u
        JOIN outcomes o ON o.id = u.id
        JOIN effectd.channels c ON c.name = u.channel AND c.notify IS NOT NULL
        JOIN effectd.channels tc ON tc.name = c.notify ->> 'channel'
        WHERE (c.notify -> 'on') ? o.outcome
    ) x
    WHERE pg_column_size(x.payload) <= x.max_payload
),
-- the probe: these events already on the bucket, in any day partition
seen AS (
    SELECT d.event_id, d.channel
    FROM effectd.intents d
    WHERE d.bucket = $5 AND d.event_id IN (SELECT event_id FROM notices)
),
notified AS (
    INSERT INTO effectd.intents (bucket, event_id, channel, payload, idempotency_key, next_attempt_at, ordering_key)
    SELECT $5, n.event_id, n.target, n.payload,
           CASE WHEN octet_length(n.target) + 1 + octet_length(n.event_id) <= 255 THEN n.target || ':' || n.event_id
                ELSE effectd.idempotency_key(n.target, n.event_id) END,
           now(), n.key
    FROM notices n
    LEFT JOIN seen s ON s.event_id = n.event_id AND s.channel = n.target
    WHERE s.event_id IS NULL
    ORDER BY n.id, n.ord
    ON CONFLICT DO NOTHING
)
SELECT bucket, created_at, channel, status AS old_status, status, old_delivery, delivery FROM updated
