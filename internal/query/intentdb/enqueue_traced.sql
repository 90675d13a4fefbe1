-- enqueue.sql's call with the producer's trace context $7 (a W3C traceparent)
-- set first, for the rest of the producer's transaction as
-- SET LOCAL effectd.traceparent would: the intent keeps it (migration 022).
-- The materialized CTE is evaluated before the call reads its row.
WITH producer_trace AS MATERIALIZED (
    SELECT set_config('effectd.traceparent', $7, true)
)
SELECT effectd.enqueue(
    event_id     => $1,
    channel      => $2,
    payload      => $3::jsonb,
    occurred_at  => $4,
    not_before   => $5,
    ordering_key => $6
)
FROM producer_trace
