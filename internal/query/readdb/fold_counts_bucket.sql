-- fold_counts.sql in the distributed mode, where intent_counts and
-- intent_count_deltas have a column bucket and are co-located with intents:
-- folds every bucket's deltas into its counts, on each shard. Citus runs the
-- delete on every shard, then the insert of the sums by bucket, in one
-- distributed transaction: each delta row is deleted, and so added, once.
-- query.FoldSettledCounts runs it under a lock only one instance holds at a
-- time (two folds would lock the same rows on several shards in any order).
WITH taken AS (
    DELETE FROM effectd.intent_count_deltas
    RETURNING bucket, day, channel, status, delivery, n
)
INSERT INTO effectd.intent_counts AS c (bucket, day, channel, status, delivery, n)
SELECT bucket, day, channel, status, delivery, sum(n)
FROM taken
GROUP BY bucket, day, channel, status, delivery
ON CONFLICT (bucket, day, channel, status, delivery) DO UPDATE SET n = c.n + excluded.n
