-- record_poll.sql in the distributed mode, for an intent of bucket $10:
-- records one delivery poll of intent $1 (attempt $2, still with idempotency
-- key $11; no row has both: nothing is written) as an attempt of kind poll on
-- the same bucket, and moves its delivery from $3 ('' = unknown) to
-- $4 with detail $5 when $4 is not empty, as a compare-and-set; the attempt
-- started at $6, with outcome $7, error $8 ('' = none) and provider
-- reference $9. One single-shard statement, which also counts the move
-- (counted) and writes the producer's notification of it (notified,
-- notices_bucket.sql). A row when the delivery moved, telling what moved: the intent's
-- bucket, created_at, channel, status (unchanged), old and new delivery. Run
-- it through query.RecordPollBucket.
WITH target AS (
    SELECT id FROM effectd.intents WHERE bucket = $10 AND id = $1 AND idempotency_key = $11
),
moved AS (
    UPDATE effectd.intents
    SET delivery = $4, delivery_detail = nullif($5, ''), delivery_at = now(), updated_at = now()
    WHERE bucket = $10 AND id = (SELECT id FROM target) AND $4 <> '' AND coalesce(delivery, '') = $3
    RETURNING bucket, created_at, channel, status, $3::text AS old_delivery, delivery,
              id, event_id, delivery_detail, provider_ref, last_error, idempotency_key, traceparent,
              -- the payload only where a copied error is to be masked (notices): the
              -- rows come back to the coordinator
              CASE WHEN last_error <> '' THEN payload END AS payload,
              false AS status_moved, coalesce(delivery, '') <> $3::text AS delivery_moved
),
recorded AS (
    INSERT INTO effectd.attempts (bucket, intent_id, attempt, kind, started_at, finished_at, outcome, error, provider_ref)
    SELECT $10, $1, $2, 'poll', $6, now(), $7, nullif($8, ''), $9
    FROM target
),
-- the move, counted when settled (the old state and delivery -1, the new +1)
-- under the intent's UTC day and channel, on its shard (docs/scale.md, "Counts")
counted AS (
    INSERT INTO effectd.intent_count_deltas (bucket, day, channel, status, delivery, n)
    SELECT $10, d.day, d.channel, d.status, d.delivery, sum(d.n)
    FROM (SELECT (created_at AT TIME ZONE 'UTC')::date AS day, channel, status, coalesce(delivery, '') AS delivery, 1 AS n
          FROM moved
          UNION ALL
          SELECT (created_at AT TIME ZONE 'UTC')::date, channel, status, old_delivery, -1
          FROM moved) AS d
    WHERE d.status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')
    GROUP BY d.day, d.channel, d.status, d.delivery
    HAVING sum(d.n) <> 0
),
-- the minute rollups (rollups_bucket.sql): the status did not move
{{rollups "moved" 10 "r.status"}},
-- the producer's notifications (notices_bucket.sql)
{{notices "moved" 10}}
SELECT bucket, created_at, channel, status AS old_status, status, old_delivery, delivery FROM moved
