-- Whether intents partition effectd.partition (named by query.PartitionHeld)
-- must stay: it holds a live row (PENDING, SENDING, IN_DOUBT; each read from
-- its partial index, the size of the backlog) or a row that changed less than
-- $1 (an interval, the retention horizon) ago (read per channel from the
-- partition's intents_prunable).
SELECT EXISTS (SELECT 1 FROM effectd.partition WHERE status = 'PENDING')
    OR EXISTS (SELECT 1 FROM effectd.partition WHERE status = 'SENDING' AND lease_expires_at IS NOT NULL)
    OR EXISTS (SELECT 1 FROM effectd.partition WHERE status = 'IN_DOUBT')
    OR EXISTS (SELECT 1
               FROM effectd.channels c
               CROSS JOIN LATERAL (
                   SELECT 1 FROM effectd.partition i
                   WHERE i.channel = c.name
                     AND i.status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')
                     AND i.updated_at >= now() - $1::interval
                   LIMIT 1) AS recent)
