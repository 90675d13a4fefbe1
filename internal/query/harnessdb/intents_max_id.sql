-- The highest intent id (0 when there is none).
SELECT coalesce(max(id), 0) FROM effectd.intents
