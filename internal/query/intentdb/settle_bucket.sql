-- settle.sql in the distributed mode, for an intent of bucket $10: every
-- table it reads or writes is restricted to that bucket, so that only the
-- bucket's shard is touched. now() is read once in a CTE: Citus refuses a
-- function that is not IMMUTABLE in a CASE of an UPDATE of a distributed
-- table. The row it settles is counted (intent_count_deltas, co-located) and
-- the producer's notification of its outcome written (notified) in the same
-- statement: in this mode no trigger does either. Run it through
-- query.SettleBucket.
WITH t AS (SELECT now() AS now),
updated AS (
    UPDATE effectd.intents
    SET status           = $4,
        provider_ref     = coalesce($5, provider_ref),
        last_error       = coalesce($6, last_error),
        next_attempt_at  = CASE WHEN $4 = 'PENDING' THEN t.now ELSE next_attempt_at END,
        lease_expires_at = NULL,
        -- found at the provider: accepted, until its events or a poll say more
        delivery         = CASE WHEN $4 = 'SENT' THEN coalesce(delivery, 'accepted') ELSE delivery END,
        delivery_at      = CASE WHEN $4 = 'SENT' AND delivery IS NULL THEN t.now ELSE delivery_at END,
        updated_at       = now()
    FROM t
    WHERE bucket = $10 AND id = $1 AND idempotency_key = $9 AND status = $3 AND attempts = $2
      AND $3 IN ('SENDING', 'IN_DOUBT') -- what the deltas below count on
    RETURNING id, claimed_at, channel, created_at, status, delivery,
              event_id, delivery_detail, provider_ref, last_error, idempotency_key, traceparent,
              -- the payload only where a copied error is to be masked (notices): the
              -- rows come back to the coordinator
              CASE WHEN last_error <> '' THEN payload END AS payload,
              status <> $3 AS status_moved,
              -- the delivery moved (from none) when this statement stamped it
              $4 = 'SENT' AND delivery_at = t.now AS delivery_moved
),
-- the settled counts: the row counts once under its UTC day, channel, status
-- and delivery when it is settled now; it was SENDING or IN_DOUBT ($3: a
-- settlement moves only an unsettled row), counted in none
counted AS (
    INSERT INTO effectd.intent_count_deltas (bucket, day, channel, status, delivery, n)
    SELECT $10, (created_at AT TIME ZONE 'UTC')::date, channel, status, coalesce(delivery, ''), 1
    FROM updated
    WHERE status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')
),
-- the minute rollups (rollups_bucket.sql): every row here was $3
{{rollups "updated" 10 "$3::text"}},
-- the producer's notifications (notices_bucket.sql)
{{notices "updated" 10}},
recorded AS (
    INSERT INTO effectd.attempts (bucket, intent_id, attempt, kind, started_at, finished_at, outcome, error, provider_ref)
    SELECT $10, $1, $2, r.kind, r.started_at, r.finished_at, r.outcome, r.error, r.provider_ref
    FROM updated, LATERAL (
        -- the call whose lease expired, when it left no attempt row of its own
        SELECT 1 AS ord, 'send' AS kind, coalesce(updated.claimed_at, now()) AS started_at, NULL::timestamptz AS finished_at,
               'lease expired' AS outcome, 'no outcome recorded before the lease expired' AS error, NULL AS provider_ref
        WHERE $3 = 'SENDING'
          AND NOT EXISTS (SELECT 1 FROM effectd.attempts a WHERE a.bucket = $10 AND a.intent_id = $1 AND a.attempt = $2 AND a.kind = 'send')
        UNION ALL
        -- the settlement itself
        SELECT 2, 'lookup', $7::timestamptz, now(), $8, $6, $5
    ) r
    ORDER BY r.ord
)
SELECT count(*) FROM updated
