-- The bytes of partitioned table $1 (a name such as 'effectd.intents'): the
-- heap of its partitions, and their indexes.
SELECT coalesce(sum(pg_table_size(inhrelid)), 0)::bigint, coalesce(sum(pg_indexes_size(inhrelid)), 0)::bigint
FROM pg_inherits WHERE inhparent = $1::regclass
