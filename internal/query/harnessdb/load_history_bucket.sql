-- The distributed mode's load_history.sql, its first part: inserts the
-- settled intents numbered $1 to $2 (event ids 's-<n>') of a history whose
-- intent $3 is dated an hour ago and intent 0 fourteen days before that, as
-- load_history.sql does, intent n in bucket n % $4. Citus runs the SELECT on
-- the coordinator and copies the rows to their shards; attempts, provider
-- events and the id mark follow (load_after_bucket.sql and the next ones),
-- since Citus plans the RETURNING CTE of load_history.sql as separate
-- statements anyway.
INSERT INTO effectd.intents (bucket, event_id, channel, payload, idempotency_key, status, attempts,
    provider_ref, last_error, delivery, claimed_at, created_at, updated_at)
SELECT g % $4::int, 's-' || g, ch, jsonb_build_object('to', '+1555' || lpad((g % 10000000)::text, 7, '0'), 'body', 'code ' || g),
       ch || ':s-' || g,
       CASE WHEN g % 3000 = 0 THEN 'FAILED' ELSE 'SENT' END, 1,
       CASE WHEN g % 3000 = 0 THEN NULL ELSE 'ref-' || g END,
       CASE WHEN g % 3000 = 0 THEN 'provider said 400: invalid number' END,
       CASE WHEN g % 3000 = 0 THEN NULL
            WHEN g % 500 = 0 AND ch <> 'bench' THEN 'undelivered'
            ELSE 'delivered' END,
       at, at, at
FROM generate_series($1::bigint, $2::bigint) g,
     LATERAL (SELECT (ARRAY['bench', 'pay', 'sms'])[1 + g % 3] AS ch,
                     now() - interval '1 hour' - ($3::bigint - g) * (interval '14 days' / $3::bigint) AS at) x
