-- Takes every delta of the minute rollups (minute_rollup_deltas), summed by
-- channel, minute, measure and slot, deleting them: each delta row is taken,
-- and so added, once, whichever instance folds at the same time. In the
-- distributed mode, where the deltas are co-located with intents, the delete
-- runs on every shard and the sums come back to the coordinator, which keeps
-- the rollups. Run it through query.FoldRollups, which adds the sums to the
-- rollups in the same transaction.
WITH taken AS (
    DELETE FROM effectd.minute_rollup_deltas
    RETURNING channel, minute, measure, slot, n
)
SELECT channel, minute, measure, slot, sum(n)::bigint
FROM taken
GROUP BY channel, minute, measure, slot
