-- An operator's transition of intent $1 from status $2 with $3 attempts to
-- status $4, setting provider reference $5 when not NULL: a fenced
-- compare-and-set that changes the row only if nobody moved it since it was
-- read and it still has idempotency key $6 (the intent the operator was
-- shown: a failover that lost an enqueue hands its id out again), and never
-- a SENDING row under a live lease. SENT (the operator found
-- the effect at the provider) makes an unknown delivery accepted, in the same
-- statement, so the notification of SENT tells it. Returns the intent after,
-- whole (see internal/query/intent_columns.sql), or no row.
UPDATE effectd.intents SET
    status           = $4,
    next_attempt_at  = CASE WHEN $4 = 'PENDING' THEN now() ELSE next_attempt_at END,
    lease_expires_at = NULL,
    provider_ref     = coalesce($5, provider_ref),
    delivery         = CASE WHEN $4 = 'SENT' THEN coalesce(delivery, 'accepted') ELSE delivery END,
    delivery_at      = CASE WHEN $4 = 'SENT' AND delivery IS NULL THEN now() ELSE delivery_at END,
    updated_at       = now()
WHERE id = $1 AND status = $2 AND attempts = $3
  AND idempotency_key = $6
  AND NOT (status = 'SENDING' AND lease_expires_at > now())
RETURNING id, event_id, channel, payload, status, attempts, next_attempt_at, lease_expires_at,
    claimed_at, idempotency_key, provider_ref, last_error, ordering_key, occurred_at, created_at, updated_at,
    delivery, delivery_detail, delivery_at
