INSERT INTO effectd.provider_events (provider, event_id, channel, object_ref, type, status, delivery, detail, outcome, payload)
VALUES ($1, $2, $3, nullif($4, ''), $5, nullif($6, ''), nullif($7, ''), nullif($8, ''), 'orphan', $9)
ON CONFLICT ON CONSTRAINT provider_events_unique DO NOTHING
RETURNING id
