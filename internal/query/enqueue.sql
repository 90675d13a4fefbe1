SELECT effectd.enqueue(
    event_id     => $1,
    channel      => $2,
    payload      => $3::jsonb,
    occurred_at  => $4,
    not_before   => $5,
    ordering_key => $6
)
