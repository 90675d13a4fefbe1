-- Reads the producer's trace context kept with intent $1 (migration 022),
-- NULL when it has none, and when the intent was created; no row when there
-- is no such intent.
SELECT traceparent, created_at FROM effectd.intents WHERE id = $1
