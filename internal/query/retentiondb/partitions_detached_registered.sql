-- Lists the intents partitions in the registry whose table is attached to no
-- parent: DropPartition detached it and stopped (a crash, a lock not free)
-- before its transaction dropped it or attached it again. FinishDetaches
-- attaches them again, so that the prune decides on them anew with writers
-- kept out. Name, parent, lower and upper bound.
SELECT p.name, p.parent, p.lower, p.upper
FROM effectd.partitions p
JOIN pg_class c ON c.relname = p.name
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'effectd'
  AND p.parent = 'intents'
  AND c.relkind = 'r'
  AND NOT c.relispartition
ORDER BY p.lower
