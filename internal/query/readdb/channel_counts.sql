-- Counts intents by channel and status, of channel $1 (NULL: every registered
-- channel), without reading history: the live states exactly, each from its
-- partial index (PENDING: intents_due; SENDING: intents_lease; IN_DOUBT:
-- intents_settled_rare), whose size is the backlog; the settled states from
-- the counts kept as changes happen (intent_counts, plus the deltas not folded
-- yet). A status with no row is absent.
WITH settled AS (
    SELECT channel, status, sum(n)::bigint AS n
    FROM (SELECT channel, status, n FROM effectd.intent_counts
          UNION ALL
          SELECT channel, status, n FROM effectd.intent_count_deltas) AS k
    GROUP BY channel, status
)
SELECT c.name, s.status, s.n
FROM effectd.channels c
CROSS JOIN LATERAL (
    SELECT 'PENDING' AS status,
           (SELECT count(*) FROM effectd.intents i WHERE i.status = 'PENDING' AND i.channel = c.name) AS n
    UNION ALL
    SELECT 'SENDING',
           (SELECT count(*) FROM effectd.intents i
            WHERE i.status = 'SENDING' AND i.lease_expires_at IS NOT NULL AND i.channel = c.name)
    UNION ALL
    SELECT 'IN_DOUBT',
           (SELECT count(*) FROM effectd.intents i WHERE i.status = 'IN_DOUBT' AND i.channel = c.name)
    UNION ALL
    SELECT st.status, st.n FROM settled st WHERE st.channel = c.name
) AS s
WHERE ($1::text IS NULL OR c.name = $1)
  AND s.n > 0
