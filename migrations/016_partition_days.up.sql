-- +goose Up
-- Partitions wider than a day, in the distributed mode (README, "Scale-out →
-- On Citus"; docs/scale.md, "Partitions a week wide"). A read that names no
-- bucket runs a task on every shard, and each task plans every partition of
-- its shard: about 6 ms per partition of a 32-shard round on the loopback
-- cluster, so that a search over 19 day partitions could not cost less than
-- 115 ms, against 31 ms over 4. There one partition of intents, attempts and
-- provider events covers partition_days UTC days (database.citus
-- .partition_days, 7 unless set: a 15-day retention keeps 3 or 4), and a row
-- waits up to that long past its retention for its partition to go. One
-- PostgreSQL keeps day partitions: effectd.citus has no row there.
ALTER TABLE effectd.citus ADD COLUMN partition_days int NOT NULL DEFAULT 1
    CHECK (partition_days BETWEEN 1 AND 31);

-- add_partition as in 014, the partition covering the span of partition_days
-- days that holds day: spans are counted from 1970-01-05, a Monday, so seven
-- days are an ISO week. The span is cut where partitions already cover it
-- (the day partitions `migrate` made before the mode was set, or a span
-- made under another width), so that partitions never overlap; a day that
-- has a partition gets none. With one day a span, it is the day itself, as
-- before.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION effectd.add_partition(parent text, day date) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    width int := coalesce((SELECT c.partition_days FROM effectd.citus c WHERE c.id = 1), 1);
    first date := date '1970-01-05' + ((day - date '1970-01-05') / width) * width;
    day_lo timestamptz := day::timestamp AT TIME ZONE 'UTC';
    day_hi timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
    lo    timestamptz;
    hi    timestamptz;
    part  text;
    r     record;
    -- in the distributed mode every unique key of intents and attempts
    -- starts with bucket (migrations/citus/distribute.sql)
    k     text := CASE WHEN parent <> 'provider_events' AND EXISTS (SELECT 1 FROM effectd.citus) THEN 'bucket, ' ELSE '' END;
BEGIN
    IF EXISTS (SELECT 1 FROM effectd.partitions p
               WHERE p.parent = add_partition.parent AND p.lower < day_hi AND p.upper > day_lo) THEN
        RETURN false;
    END IF;
    SELECT greatest(first::timestamp AT TIME ZONE 'UTC', max(p.upper)) INTO lo
    FROM effectd.partitions p WHERE p.parent = add_partition.parent AND p.upper <= day_lo;
    SELECT least((first + width)::timestamp AT TIME ZONE 'UTC', min(p.lower)) INTO hi
    FROM effectd.partitions p WHERE p.parent = add_partition.parent AND p.lower >= day_hi;
    part := parent || '_p' || to_char(lo AT TIME ZONE 'UTC', 'YYYYMMDD');
    EXECUTE format('CREATE TABLE effectd.%I (LIKE effectd.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)',
                   part, parent);
    CASE parent
    WHEN 'intents' THEN
        EXECUTE format('ALTER TABLE effectd.%I ADD CONSTRAINT %I PRIMARY KEY (%sid), ADD CONSTRAINT %I UNIQUE (%sevent_id, channel)',
                       part, part || '_pkey', k, part || '_event_channel', k);
    WHEN 'attempts' THEN
        EXECUTE format('ALTER TABLE effectd.%I ADD CONSTRAINT %I PRIMARY KEY (%sid)', part, part || '_pkey', k);
    WHEN 'provider_events' THEN
        EXECUTE format('ALTER TABLE effectd.%I ADD CONSTRAINT %I PRIMARY KEY (id), ADD CONSTRAINT %I UNIQUE (provider, channel, event_id)',
                       part, part || '_pkey', part || '_unique');
    END CASE;
    EXECUTE format('ALTER TABLE effectd.%I ATTACH PARTITION effectd.%I FOR VALUES FROM (%L) TO (%L)', parent, part, lo, hi);
    FOR r IN
        SELECT child.relname AS child, pidx.relname AS parent_index
        FROM pg_index x
        JOIN pg_class child ON child.oid = x.indexrelid
        JOIN pg_inherits ih ON ih.inhrelid = child.oid
        JOIN pg_class pidx ON pidx.oid = ih.inhparent
        WHERE x.indrelid = format('effectd.%I', part)::regclass
    LOOP
        EXECUTE format('ALTER INDEX effectd.%I RENAME TO %I', r.child, part || substr(r.parent_index, length(parent) + 1));
    END LOOP;
    INSERT INTO effectd.partitions (name, parent, lower, upper) VALUES (part, parent, lo, hi);
    RETURN true;
END
$$;
-- +goose StatementEnd
