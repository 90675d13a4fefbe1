-- Records that snapshot $1 applied $2 intents and skipped $3.
UPDATE effectd.bulk_snapshots SET applied = $2, skipped = $3 WHERE id = $1
