-- Records the outcome $3 of approved request $1, whose action ran after its
-- approval committed (a bulk action), and its state $2: approved, or failed
-- when the action could not run.
UPDATE effectd.approval_requests SET state = $2, outcome = $3
WHERE id = $1 AND state = 'approved'
