-- Decides pending approval request $1: state $2 (approved, rejected, failed
-- or expired) by decider $3 (NULL for expired) with reason $4 and outcome
-- $5. A compare-and-set: only a pending request, and never by its own
-- requester (also a CHECK of the table). Returns the id, or no row.
UPDATE effectd.approval_requests SET state = $2, decider = $3, decision_reason = nullif($4, ''), outcome = $5,
    decided_at = now()
WHERE id = $1 AND state = 'pending' AND requester IS DISTINCT FROM $3
RETURNING id
