-- Lists the tables of partitions a prune detached and forgot in one
-- transaction and has not dropped yet (the prune drops them right after; a
-- crash in between leaves them to the next prune): effectd's tables named as
-- add_partition names partitions of intents, attempts and provider events
-- that are no partition and not in the registry. add_partition makes,
-- attaches and registers a partition in one transaction, so no other table
-- answers to this.
SELECT c.relname
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'effectd'
  AND c.relkind = 'r'
  AND NOT c.relispartition
  AND c.relname ~ '^(intents|attempts|provider_events)_p[0-9]+$'
  AND NOT EXISTS (SELECT 1 FROM effectd.partitions p WHERE p.name = c.relname)
ORDER BY c.relname
