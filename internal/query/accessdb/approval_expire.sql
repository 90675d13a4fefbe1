-- Marks expired the pending approval requests of channel $1 whose time ran
-- out; reads only pending rows (approval_requests_pending).
UPDATE effectd.approval_requests SET state = 'expired', decided_at = now(),
    outcome = 'expired undecided at ' || to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
WHERE channel = $1 AND state = 'pending' AND expires_at <= now()
