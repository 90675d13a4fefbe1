-- Instance $1 takes up to $5 buckets below $4 that are free or whose lease
-- has expired, lowest first, until $2 + $3 ($2: the caller's clock, or the
-- database's when NULL). Returns each bucket taken and who held it before
-- ('' when it was free). The rows are locked as they are chosen, and the
-- lease condition is checked again on each row's newest version: two
-- instances never take the same bucket.
WITH free AS (
    SELECT bucket, coalesce(owner, '') AS was
    FROM effectd.bucket_leases
    WHERE bucket < $4 AND (owner IS NULL OR expires_at <= coalesce($2::timestamptz, now()))
    ORDER BY bucket
    LIMIT $5
    FOR UPDATE SKIP LOCKED
)
UPDATE effectd.bucket_leases l
SET owner = $1, expires_at = coalesce($2::timestamptz, now()) + $3::interval
FROM free
WHERE l.bucket = free.bucket
RETURNING l.bucket, free.was
