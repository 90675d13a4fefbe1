-- Reads intent $1 for an operator's reconcile: id, event_id, channel, payload,
-- attempts, idempotency_key, created_at, claimed_at (created_at when never
-- claimed), status, traceparent, and lease_expires_at while the lease is
-- live (else NULL).
SELECT id, event_id, channel, payload, attempts, idempotency_key, created_at,
       coalesce(claimed_at, created_at), status, traceparent,
       CASE WHEN lease_expires_at > now() THEN lease_expires_at END
FROM effectd.intents WHERE id = $1
