-- Forgets partition $1 (dropped) of parent $2 with bounds [$3, $4): its
-- registry row, and for intents the settled counts of the UTC days it held,
-- folded or not (the rows they counted are gone with it).
WITH registry AS (
    DELETE FROM effectd.partitions WHERE name = $1
),
counts AS (
    DELETE FROM effectd.intent_counts
    WHERE $2 = 'intents'
      AND day >= ($3::timestamptz AT TIME ZONE 'UTC')::date AND day < ($4::timestamptz AT TIME ZONE 'UTC')::date
)
DELETE FROM effectd.intent_count_deltas
WHERE $2 = 'intents'
  AND day >= ($3::timestamptz AT TIME ZONE 'UTC')::date AND day < ($4::timestamptz AT TIME ZONE 'UTC')::date
