-- Inserts the settled intents numbered $1 to $2 (event ids 's-<n>') of a
-- history whose intent $3 is dated an hour ago and intent 0 fourteen days
-- before that, as an import would write them: over the channels bench, pay and
-- sms in turn; one in 3,000 FAILED with its error, the others SENT with a
-- provider reference and delivered (one in 500 undelivered outside bench);
-- one attempt each, a delivered provider event for each SENT sms intent, and
-- an id mark after the last.
WITH rows AS (
    INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key, status, attempts,
        provider_ref, last_error, delivery, claimed_at, created_at, updated_at)
    SELECT 's-' || g, ch, jsonb_build_object('to', '+1555' || lpad((g % 10000000)::text, 7, '0'), 'body', 'code ' || g),
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
    RETURNING id, channel, status, provider_ref, last_error, created_at
),
events AS (
    INSERT INTO effectd.provider_events (provider, event_id, channel, intent_id, object_ref, type, status,
        delivery, outcome, payload, received_at)
    SELECT 'twilio', provider_ref || ':delivered', channel, id, provider_ref, 'delivered', 'delivered',
           'delivered', 'applied', jsonb_build_object('MessageSid', provider_ref, 'MessageStatus', 'delivered'), created_at
    FROM rows
    WHERE channel = 'sms' AND provider_ref IS NOT NULL
),
mark AS (
    INSERT INTO effectd.id_marks (at, max_id)
    SELECT max(created_at) + interval '1 microsecond', max(id) FROM rows
)
INSERT INTO effectd.attempts (intent_id, attempt, started_at, finished_at, outcome, error, provider_ref)
SELECT id, 1, created_at, created_at, CASE WHEN status = 'SENT' THEN 'sent' ELSE 'failed' END, last_error, provider_ref
FROM rows
