-- The first UTC day whose dedupe keys an intents partition could still need:
-- the day the oldest intents partition begins on ('-infinity' while the
-- first partition, which holds everything before the partitions, remains).
-- A key of an earlier day has no intent left.
SELECT coalesce((min(p.lower) AT TIME ZONE 'UTC')::date, (now() AT TIME ZONE 'UTC')::date)
FROM effectd.partitions p
WHERE p.parent = 'intents'
