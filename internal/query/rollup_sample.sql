-- Records, under the current UTC minute, each channel's backlog ($2, PENDING
-- intents) and the age of its oldest due intent ($3, seconds), channel '*'
-- being the whole system's; a later sample of the same minute replaces it.
INSERT INTO effectd.minute_rollups AS r (channel, minute, backlog, oldest_due_seconds)
SELECT c, date_trunc('minute', now()), b, a
FROM unnest($1::text[], $2::bigint[], $3::float8[]) AS t(c, b, a)
ORDER BY 1
ON CONFLICT (channel, minute) DO UPDATE
SET backlog = excluded.backlog, oldest_due_seconds = excluded.oldest_due_seconds
