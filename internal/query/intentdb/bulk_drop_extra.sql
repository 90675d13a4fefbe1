-- Drops the last row of snapshot $1, frozen past the limit only to know that
-- more intents matched.
DELETE FROM effectd.bulk_rows WHERE snapshot = $1
  AND intent_id = (SELECT max(intent_id) FROM effectd.bulk_rows WHERE snapshot = $1)
