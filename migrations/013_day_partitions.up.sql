-- +goose Up
-- Retention by partition (docs/scale.md): intents, attempts and provider
-- events are partitioned by UTC day of created_at, started_at and received_at,
-- and expired history is dropped a partition at a time (dispatcher/prune.go)
-- instead of deleted a row at a time.
--
-- The tables a deployment has become each one partition, <table>_p0, covering
-- everything before tomorrow (UTC); no row is copied. Each is checked against
-- that bound first (a scan), so the attach itself reads nothing. New days get partitions of their own, made
-- ahead by effectd.add_partitions here and by the pruner afterwards.
--
-- A unique index of a partitioned table must contain the partition key, so
-- UNIQUE (event_id, channel) is kept by each partition for its own rows, and
-- effectd.enqueue keeps it across partitions (see there). The same holds for a
-- provider event's (provider, channel, event_id), kept by query.RecordEvent.

-- partitions lists the partitions of the three tables with their bounds; the
-- pruner reads it to find what to drop, and add_partition writes it.
CREATE TABLE effectd.partitions (
    name   text PRIMARY KEY,
    parent text NOT NULL CHECK (parent IN ('intents', 'attempts', 'provider_events')),
    lower  timestamptz NOT NULL,   -- '-infinity' for <table>_p0
    upper  timestamptz NOT NULL,
    UNIQUE (parent, lower)
);

-- The settled counts (migration 012) gain the UTC day the intents were created
-- on, so that dropping a partition takes its rows out of the counts: the
-- pruner deletes the counts of the partition's days with it. Counts from
-- before this migration are the p0 partition's and get day '-infinity'.
ALTER TABLE effectd.intent_counts ADD COLUMN day date NOT NULL DEFAULT '-infinity';
ALTER TABLE effectd.intent_counts DROP CONSTRAINT intent_counts_pkey;
ALTER TABLE effectd.intent_counts ADD PRIMARY KEY (day, channel, status, delivery);
ALTER TABLE effectd.intent_count_deltas ADD COLUMN day date NOT NULL DEFAULT '-infinity';
ALTER TABLE effectd.intent_count_deltas ALTER COLUMN day DROP DEFAULT;
ALTER TABLE effectd.intent_counts ALTER COLUMN day DROP DEFAULT;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION effectd.count_settled() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO effectd.intent_count_deltas (day, channel, status, delivery, n)
        SELECT day, channel, status, delivery, sum(n)
        FROM (SELECT (created_at AT TIME ZONE 'UTC')::date AS day, channel, status, coalesce(delivery, '') AS delivery, 1 AS n
              FROM new_rows WHERE status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')
              UNION ALL
              SELECT (created_at AT TIME ZONE 'UTC')::date, channel, status, coalesce(delivery, ''), -1
              FROM old_rows WHERE status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')) AS d
        GROUP BY day, channel, status, delivery
        HAVING sum(n) <> 0;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO effectd.intent_count_deltas (day, channel, status, delivery, n)
        SELECT (created_at AT TIME ZONE 'UTC')::date, channel, status, coalesce(delivery, ''), -count(*)
        FROM old_rows WHERE status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')
        GROUP BY 1, 2, 3, 4;
    ELSE -- TRUNCATE
        DELETE FROM effectd.intent_count_deltas;
        DELETE FROM effectd.intent_counts;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION effectd.count_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO effectd.intent_count_deltas (day, channel, status, delivery, n)
    VALUES ((NEW.created_at AT TIME ZONE 'UTC')::date, NEW.channel, NEW.status, coalesce(NEW.delivery, ''), 1);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- add_partition makes the partition of parent for the UTC day day, unless a
-- partition already covers any of it, and returns whether it made one. The
-- table is made apart and then attached, which takes a lock that lets reads
-- and writes of parent go on (CREATE TABLE … PARTITION OF would stop them).
-- Each partition holds its own unique keys; the parent's other indexes are
-- made by the attach and named <partition>_<what the parent's index names>.
-- +goose StatementBegin
CREATE FUNCTION effectd.add_partition(parent text, day date) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    part  text := parent || '_p' || to_char(day, 'YYYYMMDD');
    lo    timestamptz := day::timestamp AT TIME ZONE 'UTC';
    hi    timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
    r     record;
BEGIN
    IF EXISTS (SELECT 1 FROM effectd.partitions p
               WHERE p.parent = add_partition.parent AND p.lower < hi AND p.upper > lo) THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE effectd.%I (LIKE effectd.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)',
                   part, parent);
    CASE parent
    WHEN 'intents' THEN
        EXECUTE format('ALTER TABLE effectd.%I ADD CONSTRAINT %I PRIMARY KEY (id), ADD CONSTRAINT %I UNIQUE (event_id, channel)',
                       part, part || '_pkey', part || '_event_channel');
    WHEN 'attempts' THEN
        EXECUTE format('ALTER TABLE effectd.%I ADD CONSTRAINT %I PRIMARY KEY (id)', part, part || '_pkey');
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

-- add_partitions makes the partitions of the three tables for the UTC days from
-- today to today + ahead that have none yet, and returns how many it made.
-- +goose StatementBegin
CREATE FUNCTION effectd.add_partitions(ahead int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    made int := 0;
    d    date;
    t    text;
BEGIN
    FOR d IN SELECT generate_series((now() AT TIME ZONE 'UTC')::date, (now() AT TIME ZONE 'UTC')::date + ahead, '1 day')::date LOOP
        FOREACH t IN ARRAY ARRAY['intents', 'attempts', 'provider_events'] LOOP
            IF effectd.add_partition(t, d) THEN
                made := made + 1;
            END IF;
        END LOOP;
    END LOOP;
    RETURN made;
END
$$;
-- +goose StatementEnd

-- to_partitioned turns table (its columns, checks and indexes unchanged) into
-- the partition <table>_p0 of a new partitioned table of the same name, range
-- partitioned on key, holding everything before the bound. The identity of
-- id moves to the parent, starting after the table's last id. The table's
-- indexes other than its unique keys become the parent's, found again by the
-- attach; its unique keys stay its own. Triggers are the caller's to move.
-- The attach needs every row checked against the bound: a validated check
-- constraint named <table>_partition_bound, made by hand before the upgrade
-- (README, "Scale-out"), is used with its bound, and otherwise the table is
-- read here, holding writes.
-- +goose StatementBegin
CREATE FUNCTION effectd.to_partitioned(tbl text, key text, bound timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    part  text := tbl || '_p0';
    next  bigint;
    r     record;
    defs  text[] := '{}';
    def   text;
    check_name text := tbl || '_partition_bound';
    checked    timestamptz;
BEGIN
    SELECT substring(pg_get_constraintdef(c.oid) FROM '''([^'']+)''')::timestamptz INTO checked
    FROM pg_constraint c
    WHERE c.conrelid = format('effectd.%I', tbl)::regclass AND c.conname = check_name AND c.contype = 'c' AND c.convalidated;
    IF checked IS NOT NULL THEN
        bound := checked;
    END IF;
    EXECUTE format('SELECT coalesce(max(id), 0) + 1 FROM effectd.%I', tbl) INTO next;
    EXECUTE format('ALTER TABLE effectd.%I ALTER COLUMN id DROP IDENTITY', tbl);
    EXECUTE format('ALTER TABLE effectd.%I RENAME TO %I', tbl, part);
    -- the indexes the parent will have, as their definitions on the parent
    FOR r IN
        SELECT c.relname AS name, pg_get_indexdef(x.indexrelid) AS def, x.indisunique
        FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
        WHERE x.indrelid = format('effectd.%I', part)::regclass
    LOOP
        IF NOT r.indisunique THEN
            defs := defs || replace(r.def, format(' ON effectd.%I ', part), format(' ON effectd.%I ', tbl));
        END IF;
        -- (renaming a unique key's index renames its constraint too)
        EXECUTE format('ALTER INDEX effectd.%I RENAME TO %I', r.name, part || substr(r.name, length(tbl) + 1));
    END LOOP;
    EXECUTE format('CREATE TABLE effectd.%I (LIKE effectd.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE) PARTITION BY RANGE (%I)',
                   tbl, part, key);
    EXECUTE format('ALTER TABLE effectd.%I ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (START WITH %s)', tbl, next);
    IF checked IS NOT NULL THEN
        -- the parent copied it with the other checks; only the first partition has it
        EXECUTE format('ALTER TABLE effectd.%I DROP CONSTRAINT %I', tbl, check_name);
    ELSE
        EXECUTE format('ALTER TABLE effectd.%I ADD CONSTRAINT %I CHECK (%I < %L) NOT VALID', part, check_name, key, bound);
        EXECUTE format('ALTER TABLE effectd.%I VALIDATE CONSTRAINT %I', part, check_name);
    END IF;
    EXECUTE format('ALTER TABLE effectd.%I ATTACH PARTITION effectd.%I FOR VALUES FROM (MINVALUE) TO (%L)', tbl, part, bound);
    EXECUTE format('ALTER TABLE effectd.%I DROP CONSTRAINT %I', part, check_name);
    FOREACH def IN ARRAY defs LOOP
        EXECUTE def;
    END LOOP;
    INSERT INTO effectd.partitions (name, parent, lower, upper) VALUES (part, tbl, '-infinity', bound);
END
$$;
-- +goose StatementEnd

-- Writers wait while the tables change shape; readers too, for the attach.
LOCK TABLE effectd.intents, effectd.attempts, effectd.provider_events IN ACCESS EXCLUSIVE MODE;

DROP TRIGGER intents_check_producer ON effectd.intents;
DROP TRIGGER intents_count_update ON effectd.intents;
DROP TRIGGER intents_count_delete ON effectd.intents;
DROP TRIGGER intents_count_insert ON effectd.intents;
DROP TRIGGER intents_count_truncate ON effectd.intents;
DROP TRIGGER intents_notify ON effectd.intents;

SELECT effectd.to_partitioned('intents', 'created_at', ((now() AT TIME ZONE 'UTC')::date + 1)::timestamp AT TIME ZONE 'UTC');
SELECT effectd.to_partitioned('attempts', 'started_at', ((now() AT TIME ZONE 'UTC')::date + 1)::timestamp AT TIME ZONE 'UTC');
SELECT effectd.to_partitioned('provider_events', 'received_at', ((now() AT TIME ZONE 'UTC')::date + 1)::timestamp AT TIME ZONE 'UTC');
-- to_partitioned serves this migration only.
DROP FUNCTION effectd.to_partitioned(text, text, timestamptz);

CREATE TRIGGER intents_check_producer BEFORE INSERT ON effectd.intents
    FOR EACH ROW EXECUTE FUNCTION effectd.intents_check_producer();
CREATE TRIGGER intents_count_update AFTER UPDATE ON effectd.intents
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION effectd.count_settled();
CREATE TRIGGER intents_count_delete AFTER DELETE ON effectd.intents
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION effectd.count_settled();
CREATE TRIGGER intents_count_insert AFTER INSERT ON effectd.intents
    FOR EACH ROW WHEN (NEW.status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED'))
    EXECUTE FUNCTION effectd.count_inserted();
CREATE TRIGGER intents_count_truncate AFTER TRUNCATE ON effectd.intents
    FOR EACH STATEMENT EXECUTE FUNCTION effectd.count_settled();
CREATE TRIGGER intents_notify AFTER UPDATE ON effectd.intents
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION effectd.notify_outcomes();

SELECT effectd.add_partitions(3);

-- intent_lock_key is the advisory lock that serialises the enqueues of one
-- (channel, event_id) across transactions: the first int4 names effectd's
-- lock space ("effe"), the second is the key's hash.
-- +goose StatementBegin
CREATE FUNCTION effectd.intent_lock_key(channel text, event_id text) RETURNS int
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT hashtext(channel || ':' || event_id)
$$;
-- +goose StatementEnd

-- enqueue as in 006, deduplicating across day partitions. Within a day the
-- partition's unique (event_id, channel) decides, as before. Across days,
-- enqueue first takes a transaction advisory lock on the key, which a second
-- enqueue of the same event waits on, and then looks for the key in every
-- partition. Under READ COMMITTED (the default) the look runs after the wait
-- and so sees the first enqueue's row once it has committed. Under REPEATABLE
-- READ or SERIALIZABLE the snapshot is older than the wait, so an enqueue that
-- had to wait raises serialization_failure (40001), and the producer's retry
-- runs its transaction again. A transaction holds one lock per event it
-- enqueued until it ends (README, "Scale-out": max_locks_per_transaction).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION effectd.enqueue(
    event_id     text,
    channel      text,
    payload      jsonb,
    occurred_at  timestamptz DEFAULT NULL,
    not_before   timestamptz DEFAULT NULL,
    ordering_key text DEFAULT NULL
) RETURNS boolean
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    wake      boolean;
    retention interval;
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
