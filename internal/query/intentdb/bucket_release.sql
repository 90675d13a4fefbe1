-- Instance $1 gives up its leases of buckets $2 (all of its leases when $2
-- is NULL), and, with $3, its heartbeat: another instance may take them at once.
WITH gone AS (
    DELETE FROM effectd.bucket_instances WHERE id = $1 AND $3::boolean
)
UPDATE effectd.bucket_leases
SET owner = NULL, expires_at = '-infinity'
WHERE owner = $1 AND ($2::int[] IS NULL OR bucket = ANY ($2::int[]))
