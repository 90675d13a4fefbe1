-- Extends until $2 + $3 ($2: the caller's clock, or the database's when NULL)
-- the leases instance $1 holds and that have not expired, and returns their
-- buckets (below $4: buckets past a smaller configured count are not served).
-- A lease that expired is not renewed: another instance may have taken it.
UPDATE effectd.bucket_leases
SET expires_at = coalesce($2::timestamptz, now()) + $3::interval
WHERE owner = $1 AND expires_at > coalesce($2::timestamptz, now()) AND bucket < $4
RETURNING bucket
