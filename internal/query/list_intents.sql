-- A page of intents by id, whole (see intent_columns.sql): up to $2 with an id
-- above $1, filtered by status $3, channel $4, event id $5, delivery $6, a
-- search $7 (an event id, idempotency key or provider reference, exactly),
-- created at or after $8 and before $9, and among channels $10; a NULL filter
-- does not filter. Run it through query.ListIntents.
SELECT id, event_id, channel, payload, status, attempts, next_attempt_at, lease_expires_at,
    claimed_at, idempotency_key, provider_ref, last_error, ordering_key, occurred_at, created_at, updated_at,
    delivery, delivery_detail, delivery_at
FROM effectd.intents
WHERE id > $1
  AND ($3::text IS NULL OR status = $3)
  AND ($4::text IS NULL OR channel = $4)
  AND ($5::text IS NULL OR event_id = $5)
  AND ($6::text IS NULL OR delivery = $6)
  AND ($7::text IS NULL OR event_id = $7 OR idempotency_key = $7 OR provider_ref = $7)
  AND ($8::timestamptz IS NULL OR created_at >= $8)
  AND ($9::timestamptz IS NULL OR created_at < $9)
  AND ($10::text[] IS NULL OR channel = ANY ($10))
ORDER BY id
LIMIT $2
