-- Marks snapshot $1 applied by $2, once and before it expires, and returns its
-- action, resolve_as ('' = none) and reason; no row when it was applied before
-- or has expired.
UPDATE effectd.bulk_snapshots SET applied_at = now(), applied_by = $2
WHERE id = $1 AND applied_at IS NULL AND expires_at > now()
RETURNING action, coalesce(resolve_as, ''), reason
