-- The select list of a whole intent, in the order scanIntent reads
-- it. Every statement that returns whole intents spells it out exactly like
-- this (TestIntentColumns holds them to it): select_intent.sql, operate.sql,
-- list_intents.sql, bulk_sample.sql.
id, event_id, channel, payload, status, attempts, next_attempt_at, lease_expires_at,
    claimed_at, idempotency_key, provider_ref, last_error, ordering_key, occurred_at, created_at, updated_at,
    delivery, delivery_detail, delivery_at
