-- Records that instance $1 is alive until $2 + $3 ($2: the caller's clock, or
-- the database's when NULL), and makes the lease rows of buckets 0..$4-1.
-- Returns the live instances (this one included) in id order: the caller's
-- rank among them sets its fair share of the buckets.
WITH beat AS (
    INSERT INTO effectd.bucket_instances AS b (id, started_at, expires_at)
    VALUES ($1, coalesce($2::timestamptz, now()), coalesce($2::timestamptz, now()) + $3::interval)
    ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at
    RETURNING id
),
rows AS (
    INSERT INTO effectd.bucket_leases (bucket)
    SELECT generate_series(0, $4::int - 1)
    WHERE NOT EXISTS (SELECT 1 FROM effectd.bucket_leases WHERE bucket = $4::int - 1)
    ON CONFLICT (bucket) DO NOTHING
)
SELECT id FROM effectd.bucket_instances
WHERE expires_at > coalesce($2::timestamptz, now()) AND id <> $1
UNION
SELECT id FROM beat
ORDER BY id
