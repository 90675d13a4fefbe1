-- Folds the deltas of the settled counts into intent_counts. Each delta row is
-- deleted, and so added, once, whichever instance folds at the same time.
WITH taken AS (
    DELETE FROM effectd.intent_count_deltas
    RETURNING day, channel, status, delivery, n
)
INSERT INTO effectd.intent_counts AS c (day, channel, status, delivery, n)
SELECT day, channel, status, delivery, sum(n)
FROM taken
GROUP BY day, channel, status, delivery
ON CONFLICT (day, channel, status, delivery) DO UPDATE SET n = c.n + excluded.n
