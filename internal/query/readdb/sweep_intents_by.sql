-- The intents, of any channel, whose id is in $1 or whose provider reference
-- is in $2: those of provider objects the sweep's window did not join, each
-- found through the primary key or intents_provider_ref. Columns as
-- sweep_intents.sql; a row may come twice.
SELECT id, event_id, channel, payload, status, provider_ref, created_at, claimed_at, lease_expires_at
FROM effectd.intents
WHERE id = ANY ($1::bigint[])
UNION ALL
SELECT id, event_id, channel, payload, status, provider_ref, created_at, claimed_at, lease_expires_at
FROM effectd.intents
WHERE provider_ref = ANY ($2::text[])
