-- Upserts channel $1 from the configuration: provider $2, policy $3 (JSON),
-- max_payload $4, notify $5; a row that already says the same is not touched.
-- (now() is read in VALUES, not in DO UPDATE, which Citus refuses on a
-- reference table.)
INSERT INTO effectd.channels AS c (name, provider, policy, max_payload, notify, updated_at)
VALUES ($1, $2, $3, $4, $5, now())
ON CONFLICT (name) DO UPDATE
SET provider    = excluded.provider,
    policy      = excluded.policy,
    max_payload = excluded.max_payload,
    notify      = excluded.notify,
    updated_at  = excluded.updated_at
WHERE (c.provider, c.policy, c.max_payload, c.notify) IS DISTINCT FROM (excluded.provider, excluded.policy, excluded.max_payload, excluded.notify)
