-- Applies a batch of dispatcher outcomes, one per row of the unnested arrays
-- ($1 ids … $11 deliveries, $13 idempotency keys and $16 the grace after a
-- call that may have sent, in the order of the
-- unnest below), as fenced compare-and-sets on (SENDING, attempts) of the row
-- that has the id and still the key (an id names one intent only while its
-- enqueue survives: a failover that loses it hands the id out again), records
-- one attempt row per call,
-- and returns the rows not applied (id and attempt) with why (see fenced
-- below). A batch may hold two outcomes of one intent, an attempt that waited
-- in the queue and the next one, so every outcome is matched by id and
-- attempt, never by id alone. $12 asks for
-- the rows changed while it ran to be left out, to be written again. $14 and
-- $15 bound the rows' created_at, so only the day partitions that hold the
-- batch are read, the others pruned as the statement runs. The bounds and the
-- ids are scalar subqueries, which no plan can read: a plan made for the
-- values (pruned to the batch's days, sized to its arrays) then looks no
-- cheaper than the generic one, and PostgreSQL keeps the generic plan instead
-- of planning every batch again over every day partition and its indexes
-- (TestCompleteKeepsGenericPlan). The update, and the look at the rows not
-- applied, also match the ids as an array, so that plan, which cannot know
-- how many rows the batch's days hold, still finds the rows by primary key.
-- Run it through query.Complete.
WITH input AS (
    SELECT *
    FROM unnest((SELECT $1::bigint[]), $2::int[], $3::text[], $4::text[], $5::text[],
                $6::timestamptz[], $7::timestamptz[], $8::timestamptz[], $9::text[], $10::boolean[], $11::text[],
                $13::text[], $16::interval[])
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
        -- lease ending the channel's grace after the call (the provider may
        -- still be acting on it until then), and the reconciler settles it then
        lease_expires_at = CASE WHEN input.status = 'SENDING' THEN now() + input.look_after END,
        -- what SENT says about delivery (a webhook answered 2xx: delivered),
        -- unless an earlier provider event said more
        delivery         = coalesce(i.delivery, nullif(input.delivery, '')),
        delivery_at      = CASE WHEN i.delivery IS NULL AND input.delivery <> '' THEN now() ELSE i.delivery_at END,
        updated_at       = now()
    FROM input
    WHERE i.id = input.id
      AND i.id = ANY ((SELECT $1::bigint[])::bigint[])
      AND i.created_at BETWEEN (SELECT $14::timestamptz) AND (SELECT $15::timestamptz)
      AND i.idempotency_key = input.key
      AND i.status = 'SENDING'
      AND i.attempts = input.attempts
    RETURNING i.id, i.attempts
),
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
                    WHERE a.intent_id = input.id AND a.attempt = input.attempts AND a.kind = 'callback'
                      AND a.provider_ref = nullif(input.provider_ref, ''))
                THEN 'early'
                WHEN $12::boolean AND input.status = 'SENT' AND cur.status = 'SENDING' AND cur.attempts = input.attempts
                THEN 'raced'
                ELSE 'fenced'
           END AS why
    FROM input
    LEFT JOIN updated ON updated.id = input.id AND updated.attempts = input.attempts
    LEFT JOIN effectd.intents cur ON cur.id = input.id AND cur.id = ANY ((SELECT $1::bigint[])::bigint[]) AND cur.created_at BETWEEN (SELECT $14::timestamptz) AND (SELECT $15::timestamptz)
    WHERE updated.id IS NULL
),
recorded AS (
    INSERT INTO effectd.attempts (intent_id, attempt, kind, started_at, finished_at, outcome, error, provider_ref)
    SELECT input.id, input.attempts, 'send', input.started_at, input.finished_at,
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
