-- The columns of an approval request, in the order query.scanApproval reads
-- them (a fragment: approval_get.sql, approval_lock.sql and
-- approval_pending.sql select them).
id, channel, action, intent_id, event_id, intent_status, intent_attempts, idempotency_key, parameters, reason,
    requester, created_at, expires_at,
    CASE WHEN state = 'pending' AND expires_at <= now() THEN 'expired' ELSE state END,
    decider, decision_reason, decided_at, outcome
