-- Records one delivery poll of intent $1 (attempt $2) as an attempt of kind
-- poll, and moves its delivery from $3 ('' = unknown) to $4 with detail $5 when
-- $4 is not empty, as a compare-and-set; the attempt started at $6, with
-- outcome $7, error $8 ('' = none) and provider reference $9. Returns 1 when
-- the delivery moved. Run it through query.RecordPoll.
WITH moved AS (
    UPDATE effectd.intents
    SET delivery = $4, delivery_detail = nullif($5, ''), delivery_at = now(), updated_at = now()
    WHERE id = $1 AND $4 <> '' AND coalesce(delivery, '') = $3
    RETURNING id
),
recorded AS (
    INSERT INTO effectd.attempts (intent_id, attempt, kind, started_at, finished_at, outcome, error, provider_ref)
    VALUES ($1, $2, 'poll', $6, now(), $7, nullif($8, ''), $9)
)
SELECT count(*) FROM moved
