-- Records, under the current UTC minute, each channel's backlog ($2, PENDING
-- intents) and the age of its oldest due intent ($3, seconds), channel '*'
-- being the whole system's; a later sample of the same minute replaces it.
-- The hour holding the minute (migration 027) keeps the largest of its
-- minutes' samples: this one, or the largest of the hour's earlier minutes
-- (read by primary key, at most 59 rows a channel).
WITH sample AS (
    SELECT c, date_trunc('minute', now()) AS minute, b, a
    FROM unnest($1::text[], $2::bigint[], $3::float8[]) AS t(c, b, a)
),
minutes AS (
    INSERT INTO effectd.minute_rollups AS r (channel, minute, backlog, oldest_due_seconds)
    SELECT c, minute, b, a
    FROM sample
    ORDER BY 1
    ON CONFLICT (channel, minute) DO UPDATE
    SET backlog = excluded.backlog, oldest_due_seconds = excluded.oldest_due_seconds
)
INSERT INTO effectd.hour_rollups AS r (channel, hour, backlog, oldest_due_seconds)
SELECT s.c, date_trunc('hour', s.minute, 'UTC'), greatest(s.b, e.backlog), greatest(s.a, e.oldest_due_seconds)
FROM sample s
CROSS JOIN LATERAL (
    SELECT max(m.backlog) AS backlog, max(m.oldest_due_seconds) AS oldest_due_seconds
    FROM effectd.minute_rollups m
    WHERE m.channel = s.c AND m.minute >= date_trunc('hour', s.minute, 'UTC') AND m.minute < s.minute
) AS e
ORDER BY 1
ON CONFLICT (channel, hour) DO UPDATE
SET backlog = excluded.backlog, oldest_due_seconds = excluded.oldest_due_seconds
