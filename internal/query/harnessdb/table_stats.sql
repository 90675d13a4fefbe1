-- The sizes and vacuum figures of intents and attempts, summed over their
-- partitions: intents' heap, indexes and total bytes, live and dead rows and
-- autovacuum runs; attempts' total bytes, dead rows and autovacuum runs.
WITH p AS (
    SELECT h.inhparent = 'effectd.intents'::regclass AS intents, s.relid, s.n_live_tup, s.n_dead_tup, s.autovacuum_count
    FROM pg_inherits h JOIN pg_stat_user_tables s ON s.relid = h.inhrelid
    WHERE h.inhparent IN ('effectd.intents'::regclass, 'effectd.attempts'::regclass)
)
SELECT coalesce(sum(pg_relation_size(relid)) FILTER (WHERE intents), 0)::bigint,
       coalesce(sum(pg_indexes_size(relid)) FILTER (WHERE intents), 0)::bigint,
       coalesce(sum(pg_total_relation_size(relid)) FILTER (WHERE intents), 0)::bigint,
       coalesce(sum(n_live_tup) FILTER (WHERE intents), 0)::bigint,
       coalesce(sum(n_dead_tup) FILTER (WHERE intents), 0)::bigint,
       coalesce(sum(autovacuum_count) FILTER (WHERE intents), 0)::bigint,
       coalesce(sum(pg_total_relation_size(relid)) FILTER (WHERE NOT intents), 0)::bigint,
       coalesce(sum(n_dead_tup) FILTER (WHERE NOT intents), 0)::bigint,
       coalesce(sum(autovacuum_count) FILTER (WHERE NOT intents), 0)::bigint
FROM p
