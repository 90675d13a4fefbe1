-- set_delivery.sql in the distributed mode, for an intent of bucket $5:
-- moves intent $1's delivery from $2 ('' = unknown) to $3 with detail $4
-- ('' = none), as a compare-and-set, in one single-shard statement. The row
-- returned tells what moved, for a settled count to follow: the intent's
-- bucket, created_at, channel, status (unchanged), old and new delivery. No
-- row: the delivery was no longer $2.
WITH updated AS (
    UPDATE effectd.intents
    SET delivery        = $3,
        delivery_detail = nullif($4, ''),
        delivery_at     = now(),
        updated_at      = now()
    WHERE bucket = $5 AND id = $1 AND coalesce(delivery, '') = $2
    RETURNING bucket, created_at, channel, status, $2::text AS old_delivery, delivery
)
SELECT bucket, created_at, channel, status AS old_status, status, old_delivery, delivery FROM updated
