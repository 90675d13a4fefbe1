-- Reads snapshot $1: who made it, its filter (JSON, with the channels it was
-- frozen among), when it was applied (NULL: never) and when it expires.
SELECT actor, filter, applied_at, expires_at FROM effectd.bulk_snapshots WHERE id = $1
