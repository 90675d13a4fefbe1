-- Whether intents partition effectd.partition (named by query.PartitionHeld)
-- must stay: it holds a live row (PENDING, SENDING, IN_DOUBT; each read from
-- its partial index, the size of the backlog) or a row that changed less than
-- $1 (an interval, the retention horizon) ago (read per channel from the
-- partition's intents_prunable: the channels' names are one array, so the
-- index is probed once per channel). Each probe is a plain filter with a
-- LIMIT, which Citus runs on every shard in the distributed mode (a LATERAL
-- join of the reference table channels with a LIMIT inside is refused there:
-- "cannot push down this subquery").
SELECT EXISTS (SELECT 1 FROM effectd.partition WHERE status = 'PENDING' LIMIT 1)
    OR EXISTS (SELECT 1 FROM effectd.partition WHERE status = 'SENDING' AND lease_expires_at IS NOT NULL LIMIT 1)
    OR EXISTS (SELECT 1 FROM effectd.partition WHERE status = 'IN_DOUBT' LIMIT 1)
    OR EXISTS (SELECT 1
               FROM effectd.partition i
               WHERE i.channel = ANY (ARRAY(SELECT c.name FROM effectd.channels c))
                 AND i.status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')
                 AND i.updated_at >= now() - $1::interval
               LIMIT 1)
