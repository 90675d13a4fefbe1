-- Vacuums and analyzes the tables that grow with history: intents, attempts,
-- provider events and the pending count deltas.
VACUUM ANALYZE effectd.intents, effectd.attempts, effectd.provider_events, effectd.intent_count_deltas
