-- complete.sql in the distributed mode: the batch's intents are all of
-- bucket $16, and every table it reads or writes is restricted to that
-- bucket, so that Citus runs it on the bucket's shard alone (the attempt rows
-- are co-located with their intents). query.CompleteBucket runs it; the
-- dispatcher writes a batch one bucket at a time. The rows it settles are
-- counted (intent_count_deltas, co-located too) and the producer's
-- notifications of their outcomes written (notified), in the same statement:
-- in this mode no trigger does either.
WITH input AS (
    -- now() and the lease's end as columns: Citus refuses a function that is
    -- not IMMUTABLE (now(), timestamptz + interval) in a CASE of an UPDATE of
    -- a distributed table
    SELECT *, now() AS now, now() + look_after AS look_at
    FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $5::text[],
                $6::timestamptz[], $7::timestamptz[], $8::timestamptz[], $9::text[], $10::boolean[], $11::text[],
                $13::text[], $17::interval[])
         AS t(id, attempts, status, provider_ref, last_error, next_attempt_at, started_at, finished_at, outcome, called, delivery,
              key, look_after)
),
updated AS (
    UPDATE effectd.intents i
    SET status           = input.status,
        provider_ref     = coalesce(nullif(input.provider_ref, ''), i.provider_ref),
        last_error       = nullif(input.last_error, ''),
        next_attempt_at  = coalesce(input.next_attempt_at, i.next_attempt_at),
        -- a maybe-sent call to a provider without keys stays SENDING, its
        -- lease ending the channel's grace after the call (complete.sql)
        lease_expires_at = CASE WHEN input.status = 'SENDING' THEN input.look_at END,
        -- what SENT says about delivery (a webhook answered 2xx: delivered),
        -- unless an earlier provider event said more
        delivery         = coalesce(i.delivery, nullif(input.delivery, '')),
        delivery_at      = CASE WHEN i.delivery IS NULL AND input.delivery <> '' THEN input.now ELSE i.delivery_at END,
        updated_at       = now()
    FROM input
    WHERE i.bucket = $16
      AND i.id = input.id
      AND i.created_at BETWEEN $14::timestamptz AND $15::timestamptz
      AND i.idempotency_key = input.key
      AND i.status = 'SENDING'
      AND i.attempts = input.attempts
    RETURNING i.id, i.attempts, i.channel, i.created_at, i.status, i.delivery,
              i.event_id, i.delivery_detail, i.provider_ref, i.last_error, i.idempotency_key, i.traceparent,
              -- the payload only where a copied error is to be masked (notices): the
              -- rows come back to the coordinator
              CASE WHEN i.last_error <> '' THEN i.payload END AS payload,
              i.status <> 'SENDING' AS status_moved,
              -- the delivery moved (from none) when this statement stamped it:
              -- delivery_at is input.now only so, now() being this transaction's
              -- start
              input.delivery <> '' AND i.delivery_at = input.now AS delivery_moved
),
-- the settled counts: each row settled here counts once under its UTC day,
-- channel, status and delivery ('' for none); it was SENDING, counted in none
counted AS (
    INSERT INTO effectd.intent_count_deltas (bucket, day, channel, status, delivery, n)
    SELECT $16, (created_at AT TIME ZONE 'UTC')::date, channel, status, coalesce(delivery, ''), count(*)
    FROM updated
    WHERE status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')
    GROUP BY 2, 3, 4, 5
),
-- the minute rollups (rollups_bucket.sql): every row here was SENDING
{{rollups "updated" 16 "'SENDING'"}},
-- the producer's notifications (notices_bucket.sql)
{{notices "updated" 16}},
-- the rows not applied, and why: 'early' when a provider event settled the
-- row SENT with the very reference this call returned (its callback attempt is
-- there: not a conflict); 'raced' when the row changed while this statement
-- waited for it (this statement's snapshot still shows it SENDING under this
-- attempt, and cannot show the event's callback attempt), asked for by $12:
-- such a completion is neither recorded nor counted here, but written again in
-- a statement that sees the change; 'lost' when no row has the id and the
-- key any more (not recorded: an attempt row names its intent by id only);
-- 'fenced' otherwise
fenced AS (
    SELECT input.id, input.attempts,
           CASE WHEN cur.id IS NULL OR cur.idempotency_key <> input.key
                THEN 'lost'
                WHEN input.status = 'SENT' AND EXISTS (
                    SELECT 1 FROM effectd.attempts a
                    WHERE a.bucket = $16 AND a.intent_id = input.id AND a.attempt = input.attempts AND a.kind = 'callback'
                      AND a.provider_ref = nullif(input.provider_ref, ''))
                THEN 'early'
                WHEN $12::boolean AND input.status = 'SENT' AND cur.status = 'SENDING' AND cur.attempts = input.attempts
                THEN 'raced'
                ELSE 'fenced'
           END AS why
    FROM input
    LEFT JOIN updated ON updated.id = input.id AND updated.attempts = input.attempts
    LEFT JOIN effectd.intents cur ON cur.bucket = $16 AND cur.id = input.id AND cur.created_at BETWEEN $14::timestamptz AND $15::timestamptz
    WHERE updated.id IS NULL
),
recorded AS (
    INSERT INTO effectd.attempts (bucket, intent_id, attempt, kind, started_at, finished_at, outcome, error, provider_ref)
    SELECT $16, input.id, input.attempts, 'send', input.started_at, input.finished_at,
           CASE fenced.why
               WHEN 'early' THEN input.outcome || ' (already settled by callback)'
               WHEN 'fenced' THEN input.outcome || ' (fenced out)'
               ELSE input.outcome
           END,
           nullif(input.last_error, ''), nullif(input.provider_ref, '')
    FROM input LEFT JOIN fenced ON fenced.id = input.id AND fenced.attempts = input.attempts
    WHERE input.called AND fenced.why IS DISTINCT FROM 'raced' AND fenced.why IS DISTINCT FROM 'lost'
)
SELECT id, attempts, why FROM fenced
