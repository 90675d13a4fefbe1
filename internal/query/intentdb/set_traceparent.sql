-- Sets the producer's trace context $1 (a W3C traceparent) for the rest of
-- the transaction, as SET LOCAL effectd.traceparent does: the intents the
-- transaction inserts from then on keep it (migration 022).
SELECT set_config('effectd.traceparent', $1, true)
