-- Freezes, for bulk snapshot $1, up to $2 intents in one of the states $3,
-- of channel $4, whose event id starts with $5, among channels $6 (a NULL
-- filter does not filter), by id, with the state and attempt count they are in
-- now. Run it through query.FreezeBulk.
INSERT INTO effectd.bulk_rows (snapshot, intent_id, status, attempts)
SELECT $1, id, status, attempts FROM effectd.intents
WHERE status = ANY($3::text[])
  AND ($4::text IS NULL OR channel = $4)
  AND ($5::text IS NULL OR starts_with(event_id, $5))
  AND ($6::text[] IS NULL OR channel = ANY($6))
ORDER BY id
LIMIT $2
