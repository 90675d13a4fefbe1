-- The head of a page of provider events by id: those with an id above $1.
-- query.ListEvents adds one condition for each filter present (orphans only,
-- a channel, an intent, a scope's channels), each answered by an index, then
-- ORDER BY id LIMIT $2.
SELECT id, provider, event_id, channel, intent_id, object_ref, type, status, delivery, detail, outcome, payload, received_at
FROM effectd.provider_events
WHERE id > $1
