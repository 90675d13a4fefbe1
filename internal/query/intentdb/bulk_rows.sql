-- Lists the intents frozen in snapshot $1 by id: id, the status, attempt
-- count and idempotency key frozen ('' when frozen before migration 023), and
-- the channel of the intent with that id now ('' when there is none).
SELECT b.intent_id AS id, b.status, b.attempts, coalesce(b.idempotency_key, '') AS key, coalesce(i.channel, '') AS channel
FROM effectd.bulk_rows b LEFT JOIN effectd.intents i ON i.id = b.intent_id
WHERE b.snapshot = $1 ORDER BY b.intent_id
