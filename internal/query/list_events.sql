-- A page of provider events by id: up to $2 with an id above $1, only orphans
-- when $3, of channel $4, about intent $5, among channels $6 (a NULL filter
-- does not filter). Run it through query.ListEvents.
SELECT id, provider, event_id, channel, intent_id, object_ref, type, status, delivery, detail, outcome, payload, received_at
FROM effectd.provider_events
WHERE id > $1
  AND (NOT $3 OR intent_id IS NULL)
  AND ($4::text IS NULL OR channel = $4)
  AND ($5::bigint IS NULL OR intent_id = $5)
  AND ($6::text[] IS NULL OR channel = ANY ($6))
ORDER BY id
LIMIT $2
