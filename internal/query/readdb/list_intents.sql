-- The head of a page of intents by id, whole (see internal/query/intent_columns.sql): rows
-- with an id above $1. query.ListIntents adds one condition for each filter
-- present, each answered by an index (docs/scale.md), then ORDER BY id
-- LIMIT $2.
SELECT id, event_id, channel, payload, status, attempts, next_attempt_at, lease_expires_at,
    claimed_at, idempotency_key, provider_ref, last_error, ordering_key, occurred_at, created_at, updated_at,
    delivery, delivery_detail, delivery_at
FROM effectd.intents
WHERE id > $1
