-- The minute rollups' deltas (migration 024) in the distributed mode, written
-- by the statement that moved the rows, as the trigger roll_minutes does on
-- one PostgreSQL: withNotices (notices_bucket.go) puts the CTE below into
-- each statement of this mode that settles an intent or moves its delivery
-- where {{rollups "cte" n "old"}} stands, MOVED naming that statement's CTE
-- of the rows it moved (channel, created_at, status, delivery, last_error,
-- status_moved, delivery_moved), $BUCKET its bucket parameter and OLD the
-- status the rows had before (a column or a parameter). Each moved row counts
-- under the statement's minute, on the intents' shard.
rolled AS (
    INSERT INTO effectd.minute_rollup_deltas (bucket, channel, minute, measure, slot, n)
    SELECT $BUCKET, r.channel, date_trunc('minute', now()), m.measure, m.slot, count(*)
    FROM MOVED r
    CROSS JOIN LATERAL (VALUES
        ('sent', 0, r.status_moved AND r.status = 'SENT'),
        ('failed', 0, r.status_moved AND r.status = 'FAILED'),
        ('in_doubt', 0, r.status_moved AND r.status = 'IN_DOUBT'),
        ('skipped', 0, r.status_moved AND r.status = 'SKIPPED'),
        ('accepted', 0, r.delivery_moved AND r.delivery = 'accepted'),
        ('delivered', 0, r.delivery_moved AND r.delivery = 'delivered'),
        ('undelivered', 0, r.delivery_moved AND r.delivery = 'undelivered'),
        ('provider_errors', 0, OLD = 'SENDING' AND r.status <> 'SENDING' AND r.last_error IS NOT NULL),
        ('backoffs', 0, OLD = 'SENDING' AND r.status = 'PENDING'),
        ('latency',
         least(47, greatest(0, floor(2 * ln(greatest(extract(epoch FROM now() - r.created_at) * 1000, 1)) / ln(2))))::int,
         OLD = 'SENDING' AND r.status IN ('SENT', 'FAILED', 'IN_DOUBT', 'SKIPPED'))
    ) AS m(measure, slot, hit)
    WHERE m.hit
    GROUP BY r.channel, m.measure, m.slot
)
