-- Reads intents $2 of bucket $1 in the distributed mode, whole (see
-- internal/query/intent_columns.sql), by id, and locks them until the transaction ends, on
-- the bucket's shard alone: a bulk action's batch of one bucket checks each
-- row as it is, then changes them in one statement (operate_bulk_bucket.sql).
SELECT id, event_id, channel, payload, status, attempts, next_attempt_at, lease_expires_at,
    claimed_at, idempotency_key, provider_ref, last_error, ordering_key, occurred_at, created_at, updated_at,
    delivery, delivery_detail, delivery_at
FROM effectd.intents
WHERE bucket = $1 AND id = ANY($2::bigint[])
ORDER BY id
FOR UPDATE
