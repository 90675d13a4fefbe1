-- operate_bucket.sql for a batch of a bulk action, every intent of bucket $6,
-- locked and checked by the caller in this transaction
-- (intents_lock_bucket.sql; the caller checks each row's idempotency key
-- against the one the snapshot froze, since a failover may hand a lost
-- intent's id to another): moves intent $1[i] from status $2[i] with $3[i]
-- attempts, delivery $5[i] ('' for none) and idempotency key $8[i] to status
-- $4[i], fenced on all four, never a SENDING row under a live lease; writes
-- the change to the settled counts (intent_count_deltas: the row leaves its
-- state and delivery and enters the new ones), the producer's notifications
-- of the outcomes (notified) and an operator attempt of event $7 for each row
-- changed, in one statement on the bucket's shard. now() is read once in a
-- CTE: Citus refuses a function that is not IMMUTABLE in a CASE of an UPDATE
-- of a distributed table. Returns the intents changed, whole (see
-- internal/query/intent_columns.sql).
WITH t AS (SELECT now() AS now),
input AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[], $4::text[], $5::text[], $8::text[])
        AS x(id, from_status, attempts, to_status, old_delivery, key)
),
changed AS (
    UPDATE effectd.intents i SET
        status           = input.to_status,
        next_attempt_at  = CASE WHEN input.to_status = 'PENDING' THEN t.now ELSE i.next_attempt_at END,
        lease_expires_at = NULL,
        delivery         = CASE WHEN input.to_status = 'SENT' THEN coalesce(i.delivery, 'accepted') ELSE i.delivery END,
        delivery_at      = CASE WHEN input.to_status = 'SENT' AND i.delivery IS NULL THEN t.now ELSE i.delivery_at END,
        updated_at       = now()
    FROM t, input
    WHERE i.bucket = $6 AND i.id = input.id AND i.status = input.from_status AND i.attempts = input.attempts
      AND coalesce(i.delivery, '') = input.old_delivery AND i.idempotency_key = input.key
      AND NOT (i.status = 'SENDING' AND i.lease_expires_at > now())
    RETURNING i.id, i.event_id, i.channel, i.payload, i.status, i.attempts, i.next_attempt_at, i.lease_expires_at,
        i.claimed_at, i.idempotency_key, i.provider_ref, i.last_error, i.ordering_key, i.occurred_at, i.created_at, i.updated_at,
        i.delivery, i.delivery_detail, i.delivery_at, input.from_status, input.old_delivery, i.traceparent,
        i.status <> input.from_status AS status_moved, coalesce(i.delivery, '') <> input.old_delivery AS delivery_moved
),
counted AS (
    INSERT INTO effectd.intent_count_deltas (bucket, day, channel, status, delivery, n)
    SELECT $6, d.day, d.channel, d.status, d.delivery, sum(d.n)
    FROM (SELECT (created_at AT TIME ZONE 'UTC')::date AS day, channel, status, coalesce(delivery, '') AS delivery, 1 AS n
          FROM changed
          UNION ALL
          SELECT (created_at AT TIME ZONE 'UTC')::date, channel, from_status, old_delivery, -1
          FROM changed) AS d
    WHERE d.status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')
    GROUP BY d.day, d.channel, d.status, d.delivery
    HAVING sum(d.n) <> 0
),
-- the minute rollups (rollups_bucket.sql): each row was its from_status
{{rollups "changed" 6 "r.from_status"}},
-- the producer's notifications (notices_bucket.sql)
{{notices "changed" 6}},
recorded AS (
    INSERT INTO effectd.attempts (bucket, intent_id, attempt, kind, started_at, finished_at, outcome, error, provider_ref)
    SELECT $6, id, attempts, 'operator', now(), now(), $7, NULL, NULL
    FROM changed
)
SELECT id, event_id, channel, payload, status, attempts, next_attempt_at, lease_expires_at,
    claimed_at, idempotency_key, provider_ref, last_error, ordering_key, occurred_at, created_at, updated_at,
    delivery, delivery_detail, delivery_at
FROM changed
ORDER BY id
