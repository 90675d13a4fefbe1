-- +goose Up
-- The dedupe horizon (README, "Guarantees"; docs/guarantees.md, "Dedupe").
-- Until now enqueue deduplicated across day partitions with one advisory lock
-- per event, held until the producer's transaction ended, and a probe of every
-- partition: a producer in REPEATABLE READ whose snapshot predated another
-- transaction's committed enqueue in another day's partition inserted a second
-- intent, a transaction of 20,000 enqueues ran out of the shared lock table,
-- and a redelivery after its intent was pruned was sent again.
--
-- Now every enqueue first records its key, (channel, event_id), in
-- dedupe_keys: one table, not partitioned, whose primary key decides. The
-- insert of a key another transaction holds uncommitted waits for it (a
-- row's own lock, not the lock table); a key committed after a REPEATABLE READ
-- or SERIALIZABLE snapshot raises serialization_failure (40001), which the
-- producer retries; a visible key is a duplicate. A key outlives its intent:
-- it is kept until the channel's dedupe horizon has passed (until) and no
-- intents partition that could still hold its intent remains (day), then
-- deleted by the pruner a batch at a time (query.PruneDedupeKeys).
--
-- A key is the first 16 bytes of SHA-256 of channel:event_id (a channel name
-- has no colon), as a uuid: 48 bytes a row and about 40 in its two indexes,
-- whatever the event id's length. Two keys of one channel meet with
-- probability about n²/2¹²⁹ for n keys: 10⁻¹⁹ at 10¹⁰.
-- +goose StatementBegin
-- (Not STRICT, which would keep the planner from inlining it: called as a
-- function from PL/pgSQL it cost about 100 µs an enqueue.)
CREATE FUNCTION effectd.dedupe_key(channel text, event_id text) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT encode(substring(sha256(convert_to(channel || ':' || event_id, 'UTF8')) FROM 1 FOR 16), 'hex')::uuid
$$;
-- +goose StatementEnd

-- dedupe_days is a channel's dedupe horizon in days: policy.dedupe_days (the
-- admin API's override, else the registered policy), and at least the
-- channel's retention rounded up to whole days (also its value when unset);
-- policy.DedupeHorizonDays computes the same. retention is the channel's
-- effective retention. One expression, which the planner inlines.
-- +goose StatementBegin
CREATE FUNCTION effectd.dedupe_days(policy jsonb, policy_override jsonb, retention interval) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT greatest(coalesce(coalesce(policy_override ->> 'dedupe_days', policy ->> 'dedupe_days')::int, 0),
                    ceil(extract(epoch FROM retention) / 86400)::int)
$$;
-- +goose StatementEnd

-- dedupe_days of a channel's policy layers alone, its retention read from
-- them or from policy_defaults: for statements over many rows.
-- +goose StatementBegin
CREATE FUNCTION effectd.dedupe_days(policy jsonb, policy_override jsonb) RETURNS int
LANGUAGE sql STABLE AS $$
    SELECT effectd.dedupe_days(policy, policy_override,
                               coalesce(coalesce(policy_override ->> 'retention', policy ->> 'retention')::interval,
                                        (SELECT pd.retention FROM effectd.policy_defaults pd)))
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    bucket_type regtype := (SELECT c.bucket_type FROM effectd.citus c WHERE c.id = 1);
BEGIN
    IF bucket_type IS NULL THEN
        CREATE TABLE effectd.dedupe_keys (
            key   uuid PRIMARY KEY,
            day   date NOT NULL,   -- the UTC day the intent was enqueued on
            until date NOT NULL    -- the last UTC day of the channel's dedupe horizon
        );
        INSERT INTO effectd.dedupe_keys (key, day, until)
        SELECT effectd.dedupe_key(i.channel, i.event_id), min((i.created_at AT TIME ZONE 'UTC')::date),
               max((i.created_at AT TIME ZONE 'UTC')::date + effectd.dedupe_days(c.policy, c.policy_override))
        FROM effectd.intents i LEFT JOIN effectd.channels c ON c.name = i.channel
        GROUP BY 1;
    ELSE
        -- the distributed mode: a key lives on its intent's bucket
        -- (effectd.distribute distributes the table with intents)
        EXECUTE format('CREATE TABLE effectd.dedupe_keys (bucket %s NOT NULL, key uuid NOT NULL, day date NOT NULL, until date NOT NULL, PRIMARY KEY (bucket, key))', bucket_type);
        EXECUTE 'INSERT INTO effectd.dedupe_keys (bucket, key, day, until)
                 SELECT i.bucket, effectd.dedupe_key(i.channel, i.event_id), min((i.created_at AT TIME ZONE ''UTC'')::date),
                        max((i.created_at AT TIME ZONE ''UTC'')::date + effectd.dedupe_days(c.policy, c.policy_override))
                 FROM effectd.intents i LEFT JOIN effectd.channels c ON c.name = i.channel
                 GROUP BY 1, 2';
    END IF;
END
$$;
-- +goose StatementEnd
CREATE INDEX dedupe_keys_until ON effectd.dedupe_keys (until);

-- A role that enqueues with its own rights (no access.producers) inserts the
-- key as well as the intent: every role that may insert intents may insert
-- keys (README, "Producer roles").
-- +goose StatementBegin
DO $$
DECLARE
    r name;
BEGIN
    FOR r IN
        SELECT DISTINCT pg_get_userbyid(a.grantee) FROM pg_class c, aclexplode(c.relacl) a
        WHERE c.oid = 'effectd.intents'::regclass AND a.privilege_type = 'INSERT' AND a.grantee <> 0
          AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT INSERT ON effectd.dedupe_keys TO %I', r);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- CREATE OR REPLACE keeps enqueue's grants but not SECURITY DEFINER or its
-- search_path, which migrations.SetProducers gave it: they are read here and
-- given back after.
CREATE TEMP TABLE enqueue_was ON COMMIT DROP AS
    SELECT p.prosecdef AS secdef, p.proconfig AS config FROM pg_proc p
    WHERE p.oid = 'effectd.enqueue(text, text, jsonb, timestamptz, timestamptz, text, bigint)'::regprocedure;

-- enqueue as in 014, deduplicating by dedupe_keys: no advisory lock and no
-- probe of the partitions. The caller's right to the channel is checked
-- before anything that could tell of the channel's rows (a duplicate's false
-- among them), and the payload of a duplicate is checked as an insert's.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION effectd.enqueue(
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
    c         effectd.channels;
    wake      boolean;
    retention interval;
    buckets   int;
    today     date;
    until     date;
BEGIN
    IF NOT coalesce(effectd.arguments_ok(event_id, channel, payload, occurred_at, not_before, ordering_key), false) THEN
        PERFORM effectd.check_arguments(event_id, channel, payload, occurred_at, not_before, ordering_key);
    END IF;
    SELECT * INTO c FROM effectd.channels ch WHERE ch.name = channel;
    IF NOT FOUND THEN
        PERFORM effectd.refuse('channel', 'unknown channel ' || quote_literal(left(channel, 64)));
    END IF;
    PERFORM effectd.check_producer(channel);
    retention := coalesce(c.policy_override ->> 'retention', c.policy ->> 'retention')::interval;
    IF retention IS NULL THEN
        SELECT d.retention INTO retention FROM effectd.policy_defaults d;
    END IF;
    IF occurred_at < now() - retention THEN
        PERFORM effectd.refuse('occurred_at', 'is older than the channel''s retention (' || retention || '): a copy older than the dedupe window is not sent again');
    END IF;
    payload := CASE WHEN pg_column_size(payload) <= c.max_payload AND effectd.payload_ok(c.provider, payload) THEN payload
                    ELSE effectd.checked_payload(c.provider, c.max_payload, payload) END;
    today := (now() AT TIME ZONE 'UTC')::date;
    until := today + effectd.dedupe_days(c.policy, c.policy_override, retention);

    SELECT ct.buckets INTO buckets FROM effectd.citus ct WHERE ct.id = 1;
    IF FOUND THEN
        RETURN effectd.enqueue_on_bucket(event_id, channel, payload, occurred_at, not_before, ordering_key, bucket, buckets, today, until);
    END IF;

    INSERT INTO effectd.dedupe_keys (key, day, until)
    VALUES (effectd.dedupe_key(channel, event_id), today, until)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;

    INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key, next_attempt_at, occurred_at, ordering_key)
    VALUES (event_id, channel, payload,
            CASE WHEN octet_length(channel) + 1 + octet_length(event_id) <= 255
                 THEN channel || ':' || event_id
                 ELSE effectd.idempotency_key(channel, event_id) END,
            CASE WHEN not_before > now() THEN not_before ELSE now() END,
            occurred_at, ordering_key)
    ON CONFLICT DO NOTHING
    RETURNING (SELECT (w.waiting AND w.until > now()) FROM effectd.wakeup w WHERE w.id = 1) INTO wake;
    IF NOT FOUND THEN
        -- an intent of the event written into today's partition by hand,
        -- without its key
        RETURN false;
    END IF;
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
    f text := 'effectd.enqueue(text, text, jsonb, timestamptz, timestamptz, text, bigint)';
    w record;
    g text;
BEGIN
    SELECT * INTO w FROM enqueue_was;
    IF w.secdef THEN
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER', f);
    END IF;
    FOR g IN SELECT unnest(w.config) LOOP
        EXECUTE format('ALTER FUNCTION %s SET %s TO %s', f, split_part(g, '=', 1), substr(g, length(split_part(g, '=', 1)) + 2));
    END LOOP;
END
$$;
-- +goose StatementEnd

-- enqueue_on_bucket is enqueue's write in the distributed mode, after its
-- checks: the key and the intent on the bucket's shard, each a single-shard
-- statement in the producer's transaction. An event enqueued again with
-- another bucket is another key (docs/scale.md, "Dedupe"). It replaces 014's
-- enqueue_bucketed, whose checks enqueue now makes for both modes.
DROP FUNCTION effectd.enqueue_bucketed(text, text, jsonb, timestamptz, timestamptz, text, bigint, int);
-- +goose StatementBegin
CREATE FUNCTION effectd.enqueue_on_bucket(
    event_id text, channel text, payload jsonb, occurred_at timestamptz,
    not_before timestamptz, ordering_key text, bucket bigint, buckets int, today date, until date
) RETURNS boolean
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    wake      boolean;
    inserted  boolean;
BEGIN
    IF bucket IS NULL THEN
        PERFORM effectd.refuse('bucket', 'is required: the value of the producer''s distribution column (0 to ' || (buckets - 1) || ')');
    ELSIF bucket < 0 OR bucket >= buckets THEN
        PERFORM effectd.refuse('bucket', 'must be 0 to ' || (buckets - 1) || ', got ' || bucket);
    END IF;
    INSERT INTO effectd.dedupe_keys (bucket, key, day, until)
    VALUES (bucket, effectd.dedupe_key(channel, event_id), today, until)
    ON CONFLICT DO NOTHING
    RETURNING true INTO inserted;
    IF NOT coalesce(inserted, false) THEN
        RETURN false;
    END IF;
    inserted := false;
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
    SELECT (w.waiting AND w.until > now()) INTO wake FROM effectd.wakeup w WHERE w.id = 1;
    IF wake THEN
        PERFORM pg_notify('effectd_wakeup', channel);
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- The advisory lock of 013 is gone with the probe it guarded.
DROP FUNCTION effectd.intent_lock_key(text, text);
