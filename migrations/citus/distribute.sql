-- effectd.distribute turns the schema the migrations made into the
-- distributed mode's (README, "Scale-out → On Citus"; docs/scale.md,
-- "Buckets"), on a Citus coordinator, after the migrations: migrations.Distribute
-- creates it and calls it in one transaction. Each step looks first whether
-- it is done, so a second run changes nothing.
--
-- 1. The producer's table must be hash-distributed by bucket_column, an
--    integer column; the bucket column effectd adds has its type.
-- 2. Citus refuses triggers on distributed tables: the producer check moves
--    into effectd.enqueue (for both modes, before enqueue_on_bucket), the settled counts are written
--    by the statements that change intents (step 4), and so are the notify
--    trigger's notifications of a channel's outcomes (internal/query's
--    notices_bucket.sql, written into each statement that moves an intent of
--    a bucket to an outcome: on its bucket, in the same transaction).
-- 3. intents and attempts gain bucket (existing rows: bucket 0), and each
--    partition's unique keys gain it in front: every unique key of a
--    distributed table contains its distribution column. (Their parents have
--    no unique key of their own: each day partition keeps its own, and
--    enqueue dedupes across days, migration 013.) The lookups without a
--    bucket (a provider event names its intent by id) get their indexes from
--    lookups.sql, which runs after this.
-- 4. intents and attempts are distributed by bucket, co-located with the
--    producer's table: an intent and the producer's row of the same bucket
--    live on one shard and commit together. Their day partitions are
--    distributed with them, and later ones as add_partition attaches them.
-- 4b. The settled counts (intent_counts, intent_count_deltas, migrations 012
--    and 013) gain bucket too (existing rows: bucket 0, where the intents they
--    count go), intent_counts' key with it in front, and are distributed
--    co-located with intents, in the same loop as steps 3 and 4: each statement of this mode that settles,
--    reopens or redelivers intents of a bucket writes their deltas on the same
--    shard in the same transaction (complete_bucket.sql, settle_bucket.sql,
--    operate_bucket.sql), as the dropped triggers did on one node.
-- 4c. The dedupe keys (migration 017) gain bucket too (existing keys: bucket
--    0, where their intents go), in front of their primary key, and are
--    distributed co-located with intents in the same loop: enqueue writes an
--    intent's key on its bucket's shard in the producer's transaction.
-- 4d. The minute rollups' deltas (migration 024) gain bucket too and are
--    distributed co-located with intents in the same loop: the statements
--    that move intents of a bucket append them on its shard
--    (rollups_bucket.sql); the rollups they are folded into stay on the
--    coordinator (query.FoldRollups), and the trigger that appends them on
--    one node is dropped with the others.
-- 5. channels and policy_defaults, read by claims on the workers, become
--    reference tables (a copy on every node). Every other table stays on
--    the coordinator: written often (rate_buckets, wakeup, the leases) or
--    read only there (provider_events: an event's bucket is known only once
--    its intent is found, an orphan has none, and a repeat must be found
--    whatever its bucket; partitions, audit, sessions, bulk snapshots).
-- 6. effectd.citus records the mode, which enqueue and serve read, and how
--    many days a partition made from now on covers (migration 016; those
--    made before keep theirs).
DROP FUNCTION IF EXISTS effectd.distribute(text, text, int);
CREATE OR REPLACE FUNCTION effectd.distribute(colocate_with text, bucket_column text, buckets int, partition_days int) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    producer regclass := to_regclass(colocate_with);
    method   "char";
    dist_col text;
    typ      regtype;
    have     regtype;
    t        text;
    r        record;
    done     text[] := '{}';
    have_none boolean;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'database.citus: this database has no citus extension; run CREATE EXTENSION citus on the coordinator and on every worker'
            USING ERRCODE = '55000';
    END IF;
    IF producer IS NULL THEN
        RAISE EXCEPTION 'database.citus.colocate_with: no table %', colocate_with USING ERRCODE = '42P01';
    END IF;
    EXECUTE 'SELECT partmethod, column_to_column_name(logicalrelid, partkey) FROM pg_dist_partition WHERE logicalrelid = $1'
        INTO method, dist_col USING producer;
    IF method IS DISTINCT FROM 'h' THEN
        RAISE EXCEPTION 'database.citus.colocate_with: % is not a hash-distributed table; run create_distributed_table(%, %) first',
            colocate_with, quote_literal(colocate_with), quote_literal(bucket_column) USING ERRCODE = '22023';
    END IF;
    IF dist_col IS DISTINCT FROM bucket_column THEN
        RAISE EXCEPTION 'database.citus.bucket_column: % is distributed by %, not by %', colocate_with, dist_col, bucket_column
            USING ERRCODE = '22023';
    END IF;
    SELECT a.atttypid::regtype INTO typ FROM pg_attribute a WHERE a.attrelid = producer AND a.attname = bucket_column;
    IF typ NOT IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype) THEN
        RAISE EXCEPTION 'database.citus.bucket_column: %.% is %, want smallint, integer or bigint', colocate_with, bucket_column, typ
            USING ERRCODE = '22023';
    END IF;
    IF EXISTS (SELECT 1 FROM effectd.citus c WHERE c.colocate_with <> distribute.colocate_with) THEN
        RAISE EXCEPTION 'database.citus.colocate_with: effectd is already co-located with %; moving it is not supported',
            (SELECT c.colocate_with FROM effectd.citus c) USING ERRCODE = '22023';
    END IF;

    -- (DROP TRIGGER IF EXISTS is refused on a distributed table even when
    -- there is no such trigger)
    FOR r IN
        SELECT tg.tgname FROM pg_trigger tg
        WHERE tg.tgrelid = 'effectd.intents'::regclass AND NOT tg.tgisinternal
          AND tg.tgname IN ('intents_check_producer', 'intents_count_update', 'intents_count_delete',
                            'intents_count_insert', 'intents_count_truncate', 'intents_notify',
                            'intents_roll_minutes')
    LOOP
        EXECUTE format('DROP TRIGGER %I ON effectd.intents', r.tgname);
        done := done || format('effectd.intents: trigger %s dropped', r.tgname);
    END LOOP;

    FOREACH t IN ARRAY ARRAY['intents', 'attempts', 'intent_counts', 'intent_count_deltas', 'dedupe_keys',
                             'minute_rollup_deltas'] LOOP
        SELECT a.atttypid::regtype INTO have FROM pg_attribute a
        WHERE a.attrelid = format('effectd.%I', t)::regclass AND a.attname = 'bucket' AND NOT a.attisdropped;
        IF have IS NULL THEN
            EXECUTE format('ALTER TABLE effectd.%I ADD COLUMN bucket %s NOT NULL DEFAULT 0', t, typ);
            EXECUTE format('ALTER TABLE effectd.%I ALTER COLUMN bucket DROP DEFAULT', t);
            done := done || format('effectd.%s: column bucket %s', t, typ);
        ELSIF have <> typ THEN
            RAISE EXCEPTION 'database.citus.bucket_column: effectd.%.bucket is %, but %.% is %', t, have, colocate_with, bucket_column, typ
                USING ERRCODE = '22023';
        END IF;
        FOR r IN
            SELECT c.conrelid::regclass AS rel, c.conname, pg_get_constraintdef(c.oid) AS def
            FROM pg_constraint c
            WHERE (c.conrelid = format('effectd.%I', t)::regclass
                   OR c.conrelid IN (SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = format('effectd.%I', t)::regclass))
              AND c.contype IN ('p', 'u')
              AND NOT (SELECT a.attnum FROM pg_attribute a WHERE a.attrelid = c.conrelid AND a.attname = 'bucket') = ANY (c.conkey)
        LOOP
            EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', r.rel, r.conname);
            EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I %s', r.rel, r.conname, regexp_replace(r.def, '^(PRIMARY KEY|UNIQUE) \(', '\1 (bucket, '));
            done := done || format('%s: %s %s', r.rel, r.conname, regexp_replace(r.def, '^(PRIMARY KEY|UNIQUE) \(', '\1 (bucket, '));
        END LOOP;
        IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = format('effectd.%I', t)::regclass) THEN
            PERFORM create_distributed_table(format('effectd.%I', t), 'bucket', colocate_with => producer::text);
            -- the rows are copied to the shards; the coordinator's copy goes
            PERFORM truncate_local_data_after_distributing_table(format('effectd.%I', t));
            done := done || format('effectd.%s: distributed by bucket, co-located with %s', t, colocate_with);
        END IF;
    END LOOP;

    FOREACH t IN ARRAY ARRAY['channels', 'policy_defaults'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = format('effectd.%I', t)::regclass) THEN
            PERFORM create_reference_table(format('effectd.%I', t));
            PERFORM truncate_local_data_after_distributing_table(format('effectd.%I', t));
            done := done || format('effectd.%s: reference table', t);
        END IF;
    END LOOP;

    INSERT INTO effectd.citus AS c (id, colocate_with, bucket_column, bucket_type, buckets, partition_days)
    VALUES (1, distribute.colocate_with, distribute.bucket_column, typ, distribute.buckets, distribute.partition_days)
    ON CONFLICT (id) DO UPDATE SET buckets = excluded.buckets, bucket_column = excluded.bucket_column, bucket_type = excluded.bucket_type,
                                   partition_days = excluded.partition_days
    WHERE (c.buckets, c.bucket_column, c.bucket_type, c.partition_days)
          IS DISTINCT FROM (excluded.buckets, excluded.bucket_column, excluded.bucket_type, excluded.partition_days);
    IF FOUND THEN
        done := done || format('effectd.citus: %s buckets of %s.%s, partitions of %s days', buckets, colocate_with, bucket_column, partition_days);
    END IF;

    -- 7. The day partitions made ahead before the mode was set (migration
    --    013 makes 3), wholly in the future and empty, are made again as wide
    --    as partition_days says, so that a new cluster does not plan them on
    --    every shard at every read until they expire. All of them go: one
    --    kept because it ends a span would cut the span made before it
    --    (a Thursday's migrate kept Sunday's and made Friday to Sunday).
    IF distribute.partition_days > 1 THEN
        FOR r IN
            SELECT p.name, p.parent FROM effectd.partitions p
            WHERE p.lower >= ((now() AT TIME ZONE 'UTC')::date + 1)::timestamp AT TIME ZONE 'UTC'
              AND p.upper - p.lower = interval '1 day'
            ORDER BY p.lower, p.parent
        LOOP
            EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM effectd.%I)', r.name) INTO have_none;
            CONTINUE WHEN NOT have_none;
            EXECUTE format('DROP TABLE effectd.%I', r.name);
            DELETE FROM effectd.partitions WHERE name = r.name;
            done := done || format('effectd.%s: an empty day partition ahead, made again %s days wide', r.name, distribute.partition_days);
        END LOOP;
        PERFORM effectd.add_partitions(3);
    END IF;
    RETURN done;
END
$$;
