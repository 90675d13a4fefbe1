-- Ends the lease of intent $1 (attempt $2, still with idempotency key $3) now
-- while it is still SENDING, so that the next reconciler takes it at once: a
-- reconciler that took it gives it back when shutdown cut its lookup short.
UPDATE effectd.intents
SET lease_expires_at = now(),
    updated_at       = now()
WHERE id = $1 AND idempotency_key = $3 AND status = 'SENDING' AND attempts = $2
