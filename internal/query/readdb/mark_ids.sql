-- Records the last id the intents' sequence handed out, now, unless no id was
-- drawn since the last mark; and forgets marks older than $1 (an interval).
WITH seq AS (
    SELECT coalesce(s.last_value, 0) AS max_id
    FROM pg_sequences s
    WHERE s.schemaname = 'effectd'
      AND s.sequencename = (SELECT split_part(pg_get_serial_sequence('effectd.intents', 'id'), '.', 2))
),
forget AS (
    DELETE FROM effectd.id_marks WHERE at < now() - $1::interval
)
INSERT INTO effectd.id_marks (at, max_id)
SELECT now(), seq.max_id
FROM seq
WHERE seq.max_id > coalesce((SELECT max_id FROM effectd.id_marks ORDER BY at DESC LIMIT 1), -1)
ON CONFLICT (at) DO NOTHING
