-- operator_attempt.sql in the distributed mode: the attempt row of intent $1
-- goes on its bucket $5's shard.
INSERT INTO effectd.attempts (bucket, intent_id, attempt, kind, started_at, finished_at, outcome, error, provider_ref)
VALUES ($5, $1, $2, 'operator', now(), now(), $3, NULL, $4)
