-- The bytes of the day partitions of effectd's distributed table $1 (intents
-- or attempts) on the Citus workers, every shard summed: heap and TOAST, and
-- indexes apart (pg_total_relation_size on the coordinator sees no shard).
SELECT coalesce(sum(citus_table_size(r)), 0)::bigint,
       coalesce(sum(citus_total_relation_size(r) - citus_table_size(r)), 0)::bigint
FROM effectd.partitions p, LATERAL (SELECT format('effectd.%I', p.name)::regclass AS r) x
WHERE p.parent = $1
