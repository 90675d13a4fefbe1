-- The distributed mode's load, its second part: one attempt for each intent
-- whose id is above $1, as load_history.sql writes it. Intents and attempts
-- are co-located and the SELECT names the bucket, so Citus runs it on every
-- shard at once.
INSERT INTO effectd.attempts (bucket, intent_id, attempt, started_at, finished_at, outcome, error, provider_ref)
SELECT bucket, id, 1, created_at, created_at, CASE WHEN status = 'SENT' THEN 'sent' ELSE 'failed' END, last_error, provider_ref
FROM effectd.intents
WHERE id > $1
