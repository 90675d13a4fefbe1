-- Reads and locks approval request $1 for its decision, in the transaction
-- that decides it; a pending one past its expiry reads as expired.
SELECT {{columns}} FROM effectd.approval_requests WHERE id = $1 FOR UPDATE
