-- Records an operator's transition of intent $1 (attempt $2) as an attempt of
-- kind operator with outcome $3 (the event) and provider reference $4.
INSERT INTO effectd.attempts (intent_id, attempt, kind, started_at, finished_at, outcome, error, provider_ref)
VALUES ($1, $2, 'operator', now(), now(), $3, NULL, $4)
