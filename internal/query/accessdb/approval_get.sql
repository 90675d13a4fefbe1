-- Reads approval request $1; a pending one past its expiry reads as expired.
SELECT {{columns}} FROM effectd.approval_requests WHERE id = $1
