-- Records that snapshot $1 froze $2 intents.
UPDATE effectd.bulk_snapshots SET matched = $2 WHERE id = $1
