-- Reads when snapshot $1 was applied (NULL: never) and when it expires.
SELECT applied_at, expires_at FROM effectd.bulk_snapshots WHERE id = $1
