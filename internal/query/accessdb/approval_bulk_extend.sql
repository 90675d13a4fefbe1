-- Keeps bulk snapshot $1 applicable until $2 at least (an approval request's
-- expiry), unless it was applied.
UPDATE effectd.bulk_snapshots SET expires_at = greatest(expires_at, $2)
WHERE id = $1 AND applied_at IS NULL
