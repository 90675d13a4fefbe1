-- set_delivery.sql in the distributed mode, for an intent of bucket $5:
-- moves intent $1's delivery from $2 ('' = unknown) to $3 with detail $4
-- ('' = none), as a compare-and-set on the row that still has idempotency
-- key $6, in one single-shard statement that also
-- counts the move (counted) and writes the producer's notification of it
-- (notified, notices_bucket.sql). The row returned tells what moved: the intent's
-- bucket, created_at, channel, status (unchanged), old and new delivery. No
-- row: the delivery was no longer $2.
WITH updated AS (
    UPDATE effectd.intents
    SET delivery        = $3,
        delivery_detail = nullif($4, ''),
        delivery_at     = now(),
        updated_at      = now()
    WHERE bucket = $5 AND id = $1 AND idempotency_key = $6 AND coalesce(delivery, '') = $2
    RETURNING bucket, created_at, channel, status, $2::text AS old_delivery, delivery,
              id, event_id, delivery_detail, provider_ref, last_error, idempotency_key, traceparent,
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
-- the minute rollups (rollups_bucket.sql): the status did not move
{{rollups "updated" 5 "r.status"}},
-- the producer's notifications (notices_bucket.sql)
{{notices "updated" 5}}
SELECT bucket, created_at, channel, status AS old_status, status, old_delivery, delivery FROM updated
