-- Deletes up to $3 dedupe keys whose horizon ended before UTC day $1 and
-- whose day is before $2 (DedupeKeysBound): no intent of theirs is left and
-- their channel's horizon has passed.
DELETE FROM effectd.dedupe_keys
WHERE key IN (SELECT k.key FROM effectd.dedupe_keys k
              WHERE k.until < $1::date AND k.day < $2::date
              LIMIT $3)
