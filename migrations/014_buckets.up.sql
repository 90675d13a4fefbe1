-- +goose Up
-- The distributed mode's footing (README, "Scale-out → On Citus"; docs/scale.md,
-- "Buckets"). In single-node mode nothing here changes what effectd does:
-- effectd.citus stays empty, the lease tables unused, and enqueue accepts a
-- bucket and ignores it, so a producer's code is the same in both modes.

-- citus holds one row once `effectd migrate` with database.citus has
-- distributed effectd's tables (migrations.Distribute): the producer's table
-- they are co-located with, its distribution column, and how many bucket
-- values the producer uses. enqueue and serve find the mode here.
CREATE TABLE effectd.citus (
    id            int PRIMARY KEY CHECK (id = 1),
    colocate_with text NOT NULL,   -- schema.table
    bucket_column text NOT NULL,
    bucket_type   regtype NOT NULL,
    buckets       int NOT NULL CHECK (buckets > 0)
);

-- bucket_instances lists the serve instances dividing the buckets, each until
-- its heartbeat's expiry; bucket_leases says which instance serves each bucket
-- until when. Both stay on the coordinator: they are small and written every
-- few seconds, and a write to a reference table would wait for every worker.
CREATE TABLE effectd.bucket_instances (
    id         text PRIMARY KEY,
    started_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE TABLE effectd.bucket_leases (
    bucket     int PRIMARY KEY CHECK (bucket >= 0),
    owner      text,            -- NULL: free
    expires_at timestamptz NOT NULL DEFAULT '-infinity'
);

-- add_partition as in 013, with bucket in front of the unique keys of
-- intents' and attempts' partitions in the distributed mode. Attaching the
-- new table to a distributed parent distributes it on every worker.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION effectd.add_partition(parent text, day date) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    part  text := parent || '_p' || to_char(day, 'YYYYMMDD');
    lo    timestamptz := day::timestamp AT TIME ZONE 'UTC';
    hi    timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
    r     record;
    -- in the distributed mode every unique key of intents and attempts
    -- starts with bucket (migrations/citus/distribute.sql)
    k     text := CASE WHEN parent <> 'provider_events' AND EXISTS (SELECT 1 FROM effectd.citus) THEN 'bucket, ' ELSE '' END;
BEGIN
    IF EXISTS (SELECT 1 FROM effectd.partitions p
               WHERE p.parent = add_partition.parent AND p.lower < hi AND p.upper > lo) THEN
        RETURN false;
    END IF;
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

-- enqueue as in 013, with bucket: the value of the producer's distribution
-- column for the row this intent belongs with. In Citus mode it is required,
-- 0 <= bucket < buckets, and the intent is stored on that bucket's shard
-- (enqueue_bucketed); in single-node mode it is accepted and ignored. Adding
-- an argument makes a new function: the old one is dropped, and the rights
-- that migrations.SetProducers gave it (EXECUTE grants, SECURITY DEFINER and
-- its search_path) are given to the new one here, so that producers keep
-- enqueuing between this migration and the next SetProducers.
-- +goose StatementBegin
CREATE FUNCTION effectd.enqueue_bucketed(
    event_id text, channel text, payload jsonb, occurred_at timestamptz,
    not_before timestamptz, ordering_key text, bucket bigint, buckets int
) RETURNS boolean
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    c         effectd.channels;
    wake      boolean;
    inserted  boolean;
BEGIN
    IF bucket IS NULL THEN
        PERFORM effectd.refuse('bucket', 'is required: the value of the producer''s distribution column (0 to ' || (buckets - 1) || ')');
    ELSIF bucket < 0 OR bucket >= buckets THEN
        PERFORM effectd.refuse('bucket', 'must be 0 to ' || (buckets - 1) || ', got ' || bucket);
    END IF;
    SELECT * INTO c FROM effectd.channels ch WHERE ch.name = channel;
    IF NOT FOUND THEN
        PERFORM effectd.refuse('channel', 'unknown channel ' || quote_literal(left(channel, 64)));
    END IF;
    -- no trigger checks the producer on a distributed table: enqueue does
    PERFORM effectd.check_producer(channel);
    payload := CASE WHEN pg_column_size(payload) <= c.max_payload AND effectd.payload_ok(c.provider, payload) THEN payload
                    ELSE effectd.checked_payload(c.provider, c.max_payload, payload) END;
    -- one bucket's rows are on one shard: the probe and the insert are each a
    -- single-shard statement. An event enqueued again with another bucket is
    -- not found (docs/scale.md, "Dedupe").
    IF EXISTS (SELECT 1 FROM effectd.intents i
               WHERE i.bucket = bucket AND i.event_id = event_id AND i.channel = channel) THEN
        RETURN false;
    END IF;
    INSERT INTO effectd.intents (bucket, event_id, channel, payload, idempotency_key, next_attempt_at, occurred_at, ordering_key)
    VALUES (bucket, event_id, channel, payload,
            CASE WHEN octet_length(channel) + 1 + octet_length(event_id) <= 255
                 THEN channel || ':' || event_id
                 ELSE effectd.idempotency_key(channel, event_id) END,
            CASE WHEN not_before > now() THEN not_before ELSE now() END,
            occurred_at, ordering_key)
    ON CONFLICT DO NOTHING
    RETURNING true INTO inserted;
    IF NOT coalesce(inserted, false) THEN
        RETURN false;
    END IF;
    SELECT w.waiting INTO wake FROM effectd.wakeup w WHERE w.id = 1;
    IF wake THEN
        PERFORM pg_notify('effectd_wakeup', channel);
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    old     regprocedure := 'effectd.enqueue(text, text, jsonb, timestamptz, timestamptz, text)'::regprocedure;
    secdef  boolean;
    config  text[];
    acl     aclitem[];
BEGIN
    SELECT p.prosecdef, p.proconfig, p.proacl INTO secdef, config, acl FROM pg_proc p WHERE p.oid = old;
    CREATE TEMP TABLE enqueue_rights ON COMMIT DROP AS
        SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END AS grantee
        FROM aclexplode(acl) a WHERE a.privilege_type = 'EXECUTE';
    CREATE TEMP TABLE enqueue_was ON COMMIT DROP AS
        SELECT secdef AS secdef, config AS config, acl IS NULL AS default_acl;
    DROP FUNCTION effectd.enqueue(text, text, jsonb, timestamptz, timestamptz, text);
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION effectd.enqueue(
    event_id     text,
    channel      text,
    payload      jsonb,
    occurred_at  timestamptz DEFAULT NULL,
    not_before   timestamptz DEFAULT NULL,
    ordering_key text DEFAULT NULL,
    bucket       bigint DEFAULT NULL
) RETURNS boolean
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    wake      boolean;
    retention interval;
    buckets   int;
BEGIN
    IF NOT coalesce(effectd.arguments_ok(event_id, channel, payload, occurred_at, not_before, ordering_key), false) THEN
        PERFORM effectd.check_arguments(event_id, channel, payload, occurred_at, not_before, ordering_key);
    END IF;
    IF occurred_at IS NOT NULL THEN
        retention := effectd.channel_retention(channel);
        IF occurred_at < now() - retention THEN
            PERFORM effectd.refuse('occurred_at', 'is older than the channel''s retention (' || retention || '): a copy older than the dedupe window is not sent again');
        END IF;
    END IF;

    IF NOT pg_try_advisory_xact_lock(1701209701, effectd.intent_lock_key(channel, event_id)) THEN
        IF current_setting('transaction_isolation') <> 'read committed' THEN
            RAISE EXCEPTION 'effectd.enqueue: event % of channel % is being enqueued by another transaction',
                quote_literal(left(event_id, 64)), quote_literal(left(channel, 64))
                USING ERRCODE = '40001', HINT = 'Run the transaction again.';
        END IF;
        PERFORM pg_advisory_xact_lock(1701209701, effectd.intent_lock_key(channel, event_id));
    END IF;

    SELECT ct.buckets INTO buckets FROM effectd.citus ct WHERE ct.id = 1;
    IF FOUND THEN
        RETURN effectd.enqueue_bucketed(event_id, channel, payload, occurred_at, not_before, ordering_key, bucket, buckets);
    END IF;

    IF EXISTS (SELECT 1 FROM effectd.intents i WHERE i.event_id = event_id AND i.channel = channel) THEN
        -- a duplicate: its payload is still checked, as the insert would
        PERFORM CASE WHEN pg_column_size(payload) <= c.max_payload AND effectd.payload_ok(c.provider, payload) THEN payload
                     ELSE effectd.checked_payload(c.provider, c.max_payload, payload) END
        FROM effectd.channels c
        WHERE c.name = channel;
        IF NOT FOUND THEN
            PERFORM effectd.refuse('channel', 'unknown channel ' || quote_literal(left(channel, 64)));
        END IF;
        RETURN false;
    END IF;

    INSERT INTO effectd.intents AS i (event_id, channel, payload, idempotency_key, next_attempt_at, occurred_at, ordering_key)
    SELECT event_id, channel,
           CASE WHEN pg_column_size(payload) <= c.max_payload AND effectd.payload_ok(c.provider, payload) THEN payload
                ELSE effectd.checked_payload(c.provider, c.max_payload, payload) END,
           CASE WHEN octet_length(channel) + 1 + octet_length(event_id) <= 255
                THEN channel || ':' || event_id
                ELSE effectd.idempotency_key(channel, event_id) END,
           CASE WHEN not_before > now() THEN not_before ELSE now() END,
           occurred_at, ordering_key
    FROM effectd.channels c
    WHERE c.name = channel
    ON CONFLICT DO NOTHING
    RETURNING (SELECT w.waiting FROM effectd.wakeup w WHERE w.id = 1) INTO wake;
    IF FOUND THEN
        IF wake THEN
            PERFORM pg_notify('effectd_wakeup', channel);
        END IF;
        RETURN true;
    END IF;
    -- Nothing inserted: a duplicate within the day (whose payload was still
    -- checked), or an unknown channel.
    IF NOT EXISTS (SELECT 1 FROM effectd.channels c WHERE c.name = channel) THEN
        PERFORM effectd.refuse('channel', 'unknown channel ' || quote_literal(left(channel, 64)));
    END IF;
    RETURN false;
END
$$;
-- +goose StatementEnd

-- The old function's rights, on the new one.
-- +goose StatementBegin
DO $$
DECLARE
    f   text := 'effectd.enqueue(text, text, jsonb, timestamptz, timestamptz, text, bigint)';
    w   record;
    g   text;
BEGIN
    SELECT * INTO w FROM enqueue_was;
    IF NOT w.default_acl THEN
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        FOR g IN SELECT grantee FROM enqueue_rights LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', f, g);
        END LOOP;
    END IF;
    IF w.secdef THEN
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER', f);
    END IF;
    FOR g IN SELECT unnest(w.config) LOOP
        EXECUTE format('ALTER FUNCTION %s SET %s TO %s', f, split_part(g, '=', 1), substr(g, length(split_part(g, '=', 1)) + 2));
    END LOOP;
END
$$;
-- +goose StatementEnd
