-- Creates a bulk snapshot of action $1 (resolve as $2, '' = none) over filter
-- $3 (JSON), with reason $4, by actor $5, that may be applied until $6 (an
-- interval) from now. Returns its id and when it expires.
INSERT INTO effectd.bulk_snapshots (action, resolve_as, filter, reason, actor, matched, expires_at)
VALUES ($1, nullif($2, ''), $3, $4, $5, 0, now() + $6::interval)
RETURNING id::text, expires_at
