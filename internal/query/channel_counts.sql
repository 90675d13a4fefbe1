-- Counts live intents by channel and status, of channel $1 (NULL: every channel).
SELECT channel, status, count(*) FROM effectd.intents
WHERE $1::text IS NULL OR channel = $1
GROUP BY channel, status
