-- Records an approval request of channel $1 for action $2 by requester $3
-- with reason $4, on intent $5 as shown ($6 event id, $7 status, $8 attempts,
-- $9 idempotency key; all NULL for a bulk action or a policy change), with
-- parameters $10, expiring $11 after now. Returns its id.
INSERT INTO effectd.approval_requests (channel, action, requester, reason, intent_id, event_id, intent_status,
    intent_attempts, idempotency_key, parameters, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now() + $11::interval)
RETURNING id
