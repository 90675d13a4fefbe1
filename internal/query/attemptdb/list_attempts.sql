-- Lists the newest $2 attempts of intent $1, oldest first.
SELECT * FROM (
    SELECT id, attempt, kind, started_at, finished_at, outcome, error, provider_ref
    FROM effectd.attempts WHERE intent_id = $1 ORDER BY id DESC LIMIT $2) newest
ORDER BY id
