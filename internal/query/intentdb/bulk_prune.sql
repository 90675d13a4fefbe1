-- Deletes the bulk snapshots (and, by cascade, their rows) that expired more
-- than $1 (an interval) ago.
DELETE FROM effectd.bulk_snapshots WHERE expires_at < now() - $1::interval
