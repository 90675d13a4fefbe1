-- Lists the intents frozen in snapshot $1 by id: id, the status and attempt
-- count frozen, and the intent's channel now ('' when it is gone).
SELECT b.intent_id, b.status, b.attempts, coalesce(i.channel, '')
FROM effectd.bulk_rows b LEFT JOIN effectd.intents i ON i.id = b.intent_id
WHERE b.snapshot = $1 ORDER BY b.intent_id
