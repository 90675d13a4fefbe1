-- channel_counts.sql in the distributed mode, where no trigger keeps the
-- settled counts (Citus refuses triggers on a distributed table): counts
-- intents by channel and status, of channel $1 (NULL: every registered
-- channel), by reading every row of every shard in parallel. The counts are
-- exact, and their cost grows with the history kept (counts_kind "scanned").
-- A status with no row is absent.
WITH counts AS (
    SELECT i.channel, i.status, count(*) AS n
    FROM effectd.intents i
    WHERE ($1::text IS NULL OR i.channel = $1)
    GROUP BY i.channel, i.status
)
SELECT c.name, k.status, k.n
FROM effectd.channels c
JOIN counts k ON k.channel = c.name
WHERE ($1::text IS NULL OR c.name = $1)
