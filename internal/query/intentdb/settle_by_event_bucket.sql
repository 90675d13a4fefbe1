-- settle_by_event.sql in the distributed mode, for an intent of bucket $9:
-- settles intent $1 (attempts $2, status $3: SENDING or IN_DOUBT, delivery
-- $8, '' = unknown, still with idempotency key $10) as SENT with provider reference $4, fenced, and records
-- an attempt of kind callback with outcome $5 on the same bucket; the
-- delivery becomes $6 with detail $7 ('' = none), $6 = '' leaves it. One
-- single-shard statement. now() is read once in a CTE: Citus refuses a
-- function that is not IMMUTABLE in a CASE of an UPDATE of a distributed
-- table. The delivery is part of the compare-and-set, so what moved is known
-- exactly: the statement counts it (counted), writes the producer's
-- notifications of the outcomes (notified) and returns it, the intent's
-- bucket, created_at, channel, old and new status, old and new delivery
-- ('' = unknown). No row when fenced out.
WITH t AS (SELECT now() AS now),
updated AS (
    UPDATE effectd.intents
    SET status           = 'SENT',
        provider_ref     = $4,
        lease_expires_at = NULL,
        delivery         = coalesce(nullif($6, ''), delivery),
        delivery_detail  = CASE WHEN $6 <> '' THEN nullif($7, '') ELSE delivery_detail END,
        delivery_at      = CASE WHEN $6 <> '' THEN t.now ELSE delivery_at END,
        updated_at       = t.now
    FROM t
    WHERE bucket = $9 AND id = $1 AND idempotency_key = $10 AND status = $3 AND attempts = $2 AND coalesce(delivery, '') = $8
    RETURNING bucket, created_at, channel, $3::text AS old_status, status, $8::text AS old_delivery, delivery,
              id, event_id, delivery_detail, provider_ref, last_error, idempotency_key, traceparent,
              -- the payload only where a copied error is to be masked (notices): the
              -- rows come back to the coordinator
              CASE WHEN last_error <> '' THEN payload END AS payload,
              status <> $3::text AS status_moved, coalesce(delivery, '') <> $8::text AS delivery_moved
),
recorded AS (
    INSERT INTO effectd.attempts (bucket, intent_id, attempt, kind, started_at, finished_at, outcome, error, provider_ref)
    SELECT $9, $1, $2, 'callback', now(), now(), $5, NULL, $4
    FROM updated
),
-- the move, counted when settled (the old state and delivery -1, the new +1)
-- under the intent's UTC day and channel, on its shard (docs/scale.md, "Counts")
counted AS (
    INSERT INTO effectd.intent_count_deltas (bucket, day, channel, status, delivery, n)
    SELECT $9, d.day, d.channel, d.status, d.delivery, sum(d.n)
    FROM (SELECT (created_at AT TIME ZONE 'UTC')::date AS day, channel, status, coalesce(delivery, '') AS delivery, 1 AS n
          FROM updated
          UNION ALL
          SELECT (created_at AT TIME ZONE 'UTC')::date, channel, old_status, old_delivery, -1
          FROM updated) AS d
    WHERE d.status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')
    GROUP BY d.day, d.channel, d.status, d.delivery
    HAVING sum(d.n) <> 0
),
-- the minute rollups (rollups_bucket.sql): every row here was $3
{{rollups "updated" 9 "r.old_status"}},
-- the producer's notifications (notices_bucket.sql)
{{notices "updated" 9}}
SELECT bucket, created_at, channel, old_status, status, old_delivery, coalesce(delivery, '') AS delivery FROM updated
