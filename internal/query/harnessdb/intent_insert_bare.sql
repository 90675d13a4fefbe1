-- Inserts intent event $1 on channel $2 with payload $3 (JSON text) and
-- idempotency key $4 as a bare INSERT, unless it exists: none of
-- effectd.enqueue's checks, lock or notification.
INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key)
VALUES ($1, $2, $3::jsonb, $4) ON CONFLICT DO NOTHING
