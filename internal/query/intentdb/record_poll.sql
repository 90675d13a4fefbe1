-- Records one delivery poll of intent $1 (attempt $2, still with idempotency
-- key $10: the poll was listed before the provider's call, and a failover
-- that lost the intent's enqueue meanwhile hands its id out again) as an
-- attempt of kind poll, and moves its delivery from $3 ('' = unknown) to $4
-- with detail $5 when $4 is not empty, as a compare-and-set; the attempt
-- started at $6, with outcome $7, error $8 ('' = none) and provider reference
-- $9. No row has the id and the key any more: nothing is written. Returns 1
-- when the delivery moved. Run it through query.RecordPoll.
WITH target AS (
    SELECT id FROM effectd.intents WHERE id = $1 AND idempotency_key = $10
),
moved AS (
    UPDATE effectd.intents i
    SET delivery = $4, delivery_detail = nullif($5, ''), delivery_at = now(), updated_at = now()
    FROM target
    WHERE i.id = target.id AND $4 <> '' AND coalesce(i.delivery, '') = $3
    RETURNING i.id
),
recorded AS (
    INSERT INTO effectd.attempts (intent_id, attempt, kind, started_at, finished_at, outcome, error, provider_ref)
    SELECT $1, $2, 'poll', $6, now(), $7, nullif($8, ''), $9
    FROM target
)
SELECT count(*) FROM moved
