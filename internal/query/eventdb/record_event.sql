-- Stores a provider event once per channel: provider $1, event id $2 and
-- channel $3 (unique together), object reference $4, type $5, status $6, delivery $7, detail $8
-- ('' = NULL for each of those four), payload $9, as an orphan until
-- event_outcome.sql says more. Returns its row id; no row for a repeat. Run it
-- through query.RecordEvent, after record_event_lock.sql in its transaction:
-- each day's partition keeps the key unique within the day (ON CONFLICT), and
-- the lock lets this look across the other days see an earlier copy.
INSERT INTO effectd.provider_events (provider, event_id, channel, object_ref, type, status, delivery, detail, outcome, payload)
SELECT $1, $2, $3, nullif($4, ''), $5, nullif($6, ''), nullif($7, ''), nullif($8, ''), 'orphan', $9
WHERE NOT EXISTS (SELECT 1 FROM effectd.provider_events e WHERE e.provider = $1 AND e.channel = $3 AND e.event_id = $2)
ON CONFLICT DO NOTHING
RETURNING id
