-- Calls effectd.enqueue with named arguments: event id $1, channel $2,
-- payload $3 (JSON text), occurred_at $4, not_before $5, ordering key $6
-- (NULL: not given). Returns true for a new intent, false for a duplicate.
SELECT effectd.enqueue(
    event_id     => $1,
    channel      => $2,
    payload      => $3::jsonb,
    occurred_at  => $4,
    not_before   => $5,
    ordering_key => $6
)
