-- Counts, on every Citus worker, the tables named one of $1 or one of them
-- followed by _<shard id>: what is left there of partitions dropped through
-- the coordinator (0 when the drop reached every shard).
SELECT coalesce(sum(r.result::bigint), 0)::bigint
FROM run_command_on_workers(format(
    $$SELECT count(*) FROM pg_class WHERE relkind IN ('r', 'p') AND relname ~ %L$$,
    '^(' || array_to_string($1::text[], '|') || ')(_[0-9]+)?$')) r
