-- The head of the freeze of bulk snapshot $1: at most $2 intents, by id, with
-- the state and attempt count they are in now and their idempotency key (the
-- apply changes a row only while the intent with its id has that key). query.FreezeBulk adds the
-- states the action applies to, each written in so its partial index matches,
-- and one condition for each other filter present (a channel, an event id
-- prefix, a scope's channels).
INSERT INTO effectd.bulk_rows (snapshot, intent_id, status, attempts, idempotency_key)
SELECT $1, id, status, attempts, idempotency_key FROM effectd.intents
WHERE true
