-- bulk_rows.sql in the distributed mode: lists the intents frozen in snapshot
-- $1 by id, with the status, attempt count and idempotency key frozen ('' when
-- frozen before migration 023), the channel of the intent with that id now
-- ('' when there is none) and its bucket (-1 when there is none), so that a
-- bulk action applies them a bucket at a time.
SELECT b.intent_id AS id, b.status, b.attempts, coalesce(b.idempotency_key, '') AS key, coalesce(i.channel, '') AS channel,
       coalesce(i.bucket, -1)::bigint AS bucket
FROM effectd.bulk_rows b LEFT JOIN effectd.intents i ON i.id = b.intent_id
WHERE b.snapshot = $1 ORDER BY b.intent_id
