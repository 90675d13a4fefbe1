-- dedupe_keys_prune.sql in the distributed mode, on bucket $4's shard alone.
DELETE FROM effectd.dedupe_keys
WHERE bucket = $4 AND key IN (SELECT k.key FROM effectd.dedupe_keys k
                              WHERE k.bucket = $4 AND k.until < $1::date AND k.day < $2::date
                              LIMIT $3)
