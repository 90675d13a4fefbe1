-- The first $2 intents of snapshot $1 by id, whole (see internal/query/intent_columns.sql).
SELECT id, event_id, channel, payload, status, attempts, next_attempt_at, lease_expires_at,
    claimed_at, idempotency_key, provider_ref, last_error, ordering_key, occurred_at, created_at, updated_at,
    delivery, delivery_detail, delivery_at
FROM effectd.intents
WHERE id IN (SELECT intent_id FROM effectd.bulk_rows WHERE snapshot = $1 ORDER BY intent_id LIMIT $2)
ORDER BY id
