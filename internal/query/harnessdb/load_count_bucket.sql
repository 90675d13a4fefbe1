-- The distributed mode's load, its count: the settled intents whose id is
-- above $1, counted into intent_count_deltas by bucket, UTC day, channel,
-- status and delivery, as the statements that settle intents count them (no
-- trigger counts an insert in this mode). Grouped by bucket, it runs on every
-- shard at once.
INSERT INTO effectd.intent_count_deltas (bucket, day, channel, status, delivery, n)
SELECT bucket, (created_at AT TIME ZONE 'UTC')::date, channel, status, coalesce(delivery, ''), count(*)
FROM effectd.intents
WHERE id > $1 AND status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')
GROUP BY bucket, (created_at AT TIME ZONE 'UTC')::date, channel, status, coalesce(delivery, '')
