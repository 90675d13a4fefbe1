-- Lists the day partitions that ended at least $1 (an interval, the retention
-- horizon) ago, oldest first: name, parent table, lower and upper bound. An
-- attempts or provider events partition is listed only once no intents
-- partition begins before its end and the day after (a call or an event comes
-- after its intent was created, give or take the clocks): its rows name
-- intents that are gone. Whether an intents partition may go is
-- partition_held.sql's to say.
SELECT p.name, p.parent, p.lower, p.upper
FROM effectd.partitions p
WHERE p.upper <= now() - $1::interval
  AND (p.parent = 'intents' OR NOT EXISTS (
          SELECT 1 FROM effectd.partitions i
          WHERE i.parent = 'intents' AND i.lower < p.upper + interval '1 day'))
ORDER BY p.lower, p.parent
