-- +goose Up
-- What a producer can do in its own transaction besides enqueue (README,
-- "Producers"; docs/producers.md): cancel a PENDING intent, read an intent's
-- status, and enqueue many intents in one call. Each checks the caller's
-- right to the channel (effectd.check_producer) before it reads or writes
-- anything, runs in the caller's transaction and is rolled back with it.
-- migrations.SetProducers grants them to producer roles with enqueue and
-- makes them run as their owner.

-- cancelling holds, while effectd.cancel writes, the id of the transaction
-- it writes in: the notification of a producer's cancel is effectd's own
-- write (the notify trigger enqueues it on the channel's notify channel,
-- which the producer need not be allowed), and check_producer lets it through.
-- Only the owner writes it; cancel deletes its row before it returns.
CREATE TABLE effectd.cancelling (
    xid xid8 PRIMARY KEY
);

-- check_producer as in 003, letting through the writes effectd.cancel makes
-- on a producer's behalf (effectd.cancelling) in the transaction that cancels.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION effectd.check_producer(channel text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE who name := effectd.caller();
BEGIN
    IF has_table_privilege(who, 'effectd.intents', 'INSERT') THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM effectd.producers p JOIN pg_roles r ON r.rolname = p.role
               WHERE pg_has_role(who, r.oid, 'USAGE') AND channel ~ ANY (p.patterns)) THEN
        RETURN;
    END IF;
    IF has_table_privilege(current_user, 'effectd.cancelling', 'SELECT')
       AND EXISTS (SELECT 1 FROM effectd.cancelling c WHERE c.xid = pg_current_xact_id_if_assigned()) THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'effectd.enqueue: channel: role % may not enqueue into channel %', quote_ident(who), quote_literal(left(channel, 64))
        USING ERRCODE = '42501', COLUMN = 'channel',
              HINT = 'list the channel for this role in access.producers and run effectd migrate --config';
END
$$;
-- +goose StatementEnd

-- bucket_of checks the bucket a producer passed, in the distributed mode, and
-- returns it; in single-node mode it returns NULL, whatever was passed (as
-- enqueue ignores it).
-- +goose StatementBegin
CREATE FUNCTION effectd.bucket_of(bucket bigint) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    buckets int;
BEGIN
    SELECT ct.buckets INTO buckets FROM effectd.citus ct WHERE ct.id = 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF bucket IS NULL THEN
        PERFORM effectd.refuse('bucket', 'is required: the value of the producer''s distribution column (0 to ' || (buckets - 1) || ')');
    ELSIF bucket < 0 OR bucket >= buckets THEN
        PERFORM effectd.refuse('bucket', 'must be 0 to ' || (buckets - 1) || ', got ' || bucket);
    END IF;
    RETURN bucket;
END
$$;
-- +goose StatementEnd

-- cancel moves the PENDING intent (event_id, channel) — due or scheduled —
-- to CANCELLED in the caller's transaction, audited (intent.cancel, the
-- calling role as actor, reason) and told to the producer like any outcome
-- (the channel's notify: on one node by the notify trigger, in the
-- distributed mode here, as notices_bucket.sql writes it), its settled count
-- kept (on one node by the count trigger, in the distributed mode here). It
-- returns the status the intent has after the call: CANCELLED when it is
-- cancelled, now or before; SENDING, IN_DOUBT, SENT, FAILED or SKIPPED,
-- which it leaves as they are; NULL when the channel holds no such event.
-- The update is a compare-and-set on PENDING: a claim that moved the row
-- first makes it answer SENDING, and a claim after it finds no PENDING row
-- (it skips the row while this transaction holds it).
-- +goose StatementBegin
CREATE FUNCTION effectd.cancel(event_id text, channel text, reason text, bucket bigint DEFAULT NULL) RETURNS text
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    r      effectd.intents;
    answer text;
    c      effectd.channels;
    notice jsonb;
    note   text;
BEGIN
    IF channel IS NULL OR channel = '' THEN
        PERFORM effectd.refuse('channel', 'must not be empty');
    END IF;
    PERFORM effectd.check_producer(channel);
    IF event_id IS NULL OR event_id = '' THEN
        PERFORM effectd.refuse('event_id', 'must not be empty');
    END IF;
    IF reason IS NULL OR btrim(reason) = '' THEN
        PERFORM effectd.refuse('reason', 'is required: it is kept in the audit');
    ELSIF octet_length(reason) > 1024 THEN
        PERFORM effectd.refuse('reason', 'is ' || octet_length(reason) || ' bytes, more than 1024');
    END IF;
    bucket := effectd.bucket_of(bucket);

    IF bucket IS NULL THEN
        -- the notify trigger enqueues the notification as effectd
        IF EXISTS (SELECT 1 FROM effectd.channels ch WHERE ch.name = channel AND ch.notify IS NOT NULL) THEN
            INSERT INTO effectd.cancelling (xid) VALUES (pg_current_xact_id()) ON CONFLICT DO NOTHING;
        END IF;
        UPDATE effectd.intents i SET status = 'CANCELLED', lease_expires_at = NULL, updated_at = now()
        WHERE i.event_id = event_id AND i.channel = channel AND i.status = 'PENDING'
        RETURNING i.* INTO r;
        DELETE FROM effectd.cancelling x WHERE x.xid = pg_current_xact_id_if_assigned();
    ELSE
        UPDATE effectd.intents i SET status = 'CANCELLED', lease_expires_at = NULL, updated_at = now()
        WHERE i.bucket = bucket AND i.event_id = event_id AND i.channel = channel AND i.status = 'PENDING'
        RETURNING i.* INTO r;
    END IF;
    IF r.id IS NULL THEN
        SELECT s.status INTO answer FROM effectd.status(event_id, channel, bucket) s;
        RETURN answer;
    END IF;

    INSERT INTO effectd.audit (actor, action, intent_id, channel, before, after, reason)
    VALUES (effectd.caller(), 'intent.cancel', r.id, channel,
            jsonb_build_object('status', 'PENDING', 'attempts', r.attempts, 'provider_ref', r.provider_ref,
                               'next_attempt_at', r.next_attempt_at),
            jsonb_build_object('status', 'CANCELLED', 'attempts', r.attempts, 'provider_ref', r.provider_ref,
                               'next_attempt_at', r.next_attempt_at, 'reason', reason),
            reason);

    IF bucket IS NOT NULL THEN
        -- no trigger on a distributed table: the settled count (PENDING is
        -- counted nowhere) and the notification are written here
        INSERT INTO effectd.intent_count_deltas (bucket, day, channel, status, delivery, n)
        VALUES (bucket, (r.created_at AT TIME ZONE 'UTC')::date, channel, 'CANCELLED', coalesce(r.delivery, ''), 1);
        SELECT * INTO c FROM effectd.channels ch WHERE ch.name = channel;
        IF c.notify IS NOT NULL AND (c.notify -> 'on') ? 'cancelled' THEN
            note := effectd.notify_key(r.idempotency_key, 'cancelled');
            notice := jsonb_build_object('type', 'effect.cancelled', 'intent', jsonb_build_object(
                'id', r.id, 'event_id', r.event_id, 'channel', r.channel, 'status', 'CANCELLED',
                'delivery', r.delivery, 'delivery_detail', r.delivery_detail, 'provider_ref', r.provider_ref,
                'last_error', effectd.redact_text(r.last_error, r.payload, c.redact)));
            IF pg_column_size(notice) <= (SELECT tc.max_payload FROM effectd.channels tc WHERE tc.name = c.notify ->> 'channel')
               AND NOT EXISTS (SELECT 1 FROM effectd.intents d
                               WHERE d.bucket = bucket AND d.event_id = note AND d.channel = c.notify ->> 'channel') THEN
                INSERT INTO effectd.intents (bucket, event_id, channel, payload, idempotency_key, next_attempt_at, ordering_key)
                VALUES (bucket, note, c.notify ->> 'channel', notice,
                        CASE WHEN octet_length(c.notify ->> 'channel') + 1 + octet_length(note) <= 255
                             THEN (c.notify ->> 'channel') || ':' || note
                             ELSE effectd.idempotency_key(c.notify ->> 'channel', note) END,
                        now(), r.idempotency_key)
                ON CONFLICT DO NOTHING;
            END IF;
        END IF;
    END IF;
    RETURN 'CANCELLED';
END
$$;
-- +goose StatementEnd

-- status answers, for the intent (event_id, channel), one row: its status,
-- attempts, provider reference, delivery, the class of its last error (the
-- outcome of the last attempt that recorded one: retry, failed, in_doubt,
-- maybe_sent, quarantined…; never the error's text, which may quote what the
-- channel redacts) and, while PENDING, when it is next due. No row when the
-- channel holds no such event.
-- +goose StatementBegin
CREATE FUNCTION effectd.status(event_id text, channel text, bucket bigint DEFAULT NULL)
RETURNS TABLE (status text, attempts int, provider_ref text, delivery text, last_error_class text, next_attempt_at timestamptz)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_variable
BEGIN
    IF channel IS NULL OR channel = '' THEN
        PERFORM effectd.refuse('channel', 'must not be empty');
    END IF;
    PERFORM effectd.check_producer(channel);
    bucket := effectd.bucket_of(bucket);
    IF bucket IS NULL THEN
        RETURN QUERY
        SELECT i.status, i.attempts, i.provider_ref, i.delivery,
               CASE WHEN i.last_error IS NOT NULL THEN
                   coalesce((SELECT a.outcome FROM effectd.attempts a
                             WHERE a.intent_id = i.id AND a.error IS NOT NULL
                             ORDER BY a.id DESC LIMIT 1), lower(i.status))
               END,
               CASE WHEN i.status = 'PENDING' THEN i.next_attempt_at END
        FROM effectd.intents i
        WHERE i.event_id = event_id AND i.channel = channel;
    ELSE
        -- the same on the bucket's shard
        RETURN QUERY
        SELECT i.status, i.attempts, i.provider_ref, i.delivery,
               CASE WHEN i.last_error IS NOT NULL THEN
                   coalesce((SELECT a.outcome FROM effectd.attempts a
                             WHERE a.bucket = bucket AND a.intent_id = i.id AND a.error IS NOT NULL
                             ORDER BY a.id DESC LIMIT 1), lower(i.status))
               END,
               CASE WHEN i.status = 'PENDING' THEN i.next_attempt_at END
        FROM effectd.intents i
        WHERE i.bucket = bucket AND i.event_id = event_id AND i.channel = channel;
    END IF;
END
$$;
-- +goose StatementEnd

-- new_intent is one intent of a batch for enqueue_many: enqueue's arguments.
CREATE TYPE effectd.new_intent AS (
    event_id     text,
    channel      text,
    payload      jsonb,
    occurred_at  timestamptz,
    not_before   timestamptz,
    ordering_key text
);

-- enqueue_many records a batch of intents as enqueue records each: the same
-- checks, the same producer check (every channel of the batch, before
-- anything is read; 42501 refuses the whole batch) and the same dedupe by
-- dedupe_keys. It answers one row per intent, by its position in the batch
-- (ord, from 1): outcome new, duplicate (of an intent recorded before or of
-- an earlier row of the batch), or invalid with the field and message
-- enqueue would have refused it with. A batch with an invalid row is refused
-- whole (22023, naming every invalid row; DETAIL: them as a JSON array)
-- unless keep_valid, when its valid rows are recorded and the invalid ones
-- answered. Nothing is half-recorded: the keys and intents are written by
-- two statements in the caller's transaction, after every check.
--
-- The checks: one statement runs the boolean fast checks (arguments_ok,
-- payload_ok, the size and retention limits) over every row, and only the
-- rows that fail them go through the raising checks, each in a block of its
-- own, to get enqueue's message: a block per row is a subtransaction, which
-- a batch of 10,000 good rows would pay 10,000 times. (A block that only
-- reads is never given a transaction id, so many invalid rows do not
-- overflow the subtransaction cache either.)
-- +goose StatementBegin
CREATE FUNCTION effectd.enqueue_many(intents effectd.new_intent[], keep_valid boolean DEFAULT false, bucket bigint DEFAULT NULL)
RETURNS TABLE (ord int, outcome text, field text, message text)
LANGUAGE plpgsql
-- The planner cannot know a batch's size or how many of its rows are first of
-- their event, and reads a join of them as of a row or two: a nested loop,
-- 40 million comparisons at 10,000 rows. Joins here are hashed or merged.
SET enable_nestloop = off
AS $$
#variable_conflict use_column
DECLARE
    n         int := coalesce(cardinality(intents), 0);
    b         bigint;
    ok        boolean[];
    bad_field text[] := array_fill(NULL::text, ARRAY[n]);
    bad_msg   text[] := array_fill(NULL::text, ARRAY[n]);
    invalid   boolean[] := array_fill(false, ARRAY[n]);
    bad       int := 0;
    is_new    boolean[] := array_fill(false, ARRAY[n]);
    fresh     int[];
    woken     text[];
    x         record;
    f         text;
    m         text;
    i         int;
    retention interval;
    wake      boolean;
BEGIN
    IF n = 0 THEN
        RETURN;
    END IF;
    b := effectd.bucket_of(enqueue_many.bucket);
    PERFORM effectd.check_producer(ch.name)
    FROM (SELECT DISTINCT t.channel FROM unnest(intents) t) d JOIN effectd.channels ch ON ch.name = d.channel;

    -- the fast checks, every row
    SELECT array_agg(coalesce(
               effectd.arguments_ok(t.event_id, t.channel, t.payload, t.occurred_at, t.not_before, t.ordering_key)
               AND c.name IS NOT NULL
               AND (t.occurred_at IS NULL
                    OR t.occurred_at >= now() - coalesce(coalesce(c.policy_override ->> 'retention', c.policy ->> 'retention')::interval,
                                                         (SELECT pd.retention FROM effectd.policy_defaults pd)))
               AND pg_column_size(t.payload) <= c.max_payload AND effectd.payload_ok(c.provider, t.payload), false)
           ORDER BY t.n)
    INTO ok
    FROM unnest(intents) WITH ORDINALITY AS t(event_id, channel, payload, occurred_at, not_before, ordering_key, n)
    LEFT JOIN effectd.channels c ON c.name = t.channel;

    -- the raising checks, in enqueue's order, for the rows that failed them
    FOR x IN
        SELECT t.*, c.name AS known, c.provider, c.max_payload, c.policy, c.policy_override
        FROM unnest(intents) WITH ORDINALITY AS t(event_id, channel, payload, occurred_at, not_before, ordering_key, n)
        LEFT JOIN effectd.channels c ON c.name = t.channel
        WHERE NOT ok[t.n]
        ORDER BY t.n
    LOOP
        BEGIN
            PERFORM effectd.check_arguments(x.event_id, x.channel, x.payload, x.occurred_at, x.not_before, x.ordering_key);
            IF x.known IS NULL THEN
                PERFORM effectd.refuse('channel', 'unknown channel ' || quote_literal(left(x.channel, 64)));
            END IF;
            IF x.occurred_at IS NOT NULL THEN
                retention := coalesce(coalesce(x.policy_override ->> 'retention', x.policy ->> 'retention')::interval,
                                      (SELECT pd.retention FROM effectd.policy_defaults pd));
                IF x.occurred_at < now() - retention THEN
                    PERFORM effectd.refuse('occurred_at', 'is older than the channel''s retention (' || retention || '): a copy older than the dedupe window is not sent again');
                END IF;
            END IF;
            PERFORM effectd.checked_payload(x.provider, x.max_payload, x.payload);
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS f = COLUMN_NAME, m = MESSAGE_TEXT;
            bad_field[x.n] := coalesce(nullif(f, ''), 'payload');
            bad_msg[x.n] := m;
            invalid[x.n] := true;
            bad := bad + 1;
        END;
    END LOOP;
    IF bad > 0 AND NOT coalesce(keep_valid, false) THEN
        RAISE EXCEPTION 'effectd.enqueue_many: % of % intents are invalid, nothing was recorded: %', bad, n,
            (SELECT string_agg('#' || e.o || ' ' || e.m, '; ' ORDER BY e.o)
             FROM (SELECT e.o, e.m FROM unnest(bad_msg) WITH ORDINALITY AS e(m, o) WHERE e.m IS NOT NULL ORDER BY e.o LIMIT 10) e)
            || CASE WHEN bad > 10 THEN '; and ' || (bad - 10) || ' more (see DETAIL)' ELSE '' END
            USING ERRCODE = '22023', COLUMN = 'intents',
                  DETAIL = (SELECT jsonb_agg(jsonb_build_object('ord', e.o, 'field', e.f, 'message', e.m) ORDER BY e.o)::text
                            FROM unnest(bad_field, bad_msg) WITH ORDINALITY AS e(f, m, o) WHERE e.m IS NOT NULL),
                  HINT = 'fix the rows, or pass keep_valid => true to record the valid ones and be answered the rest';
    END IF;

    -- The keys, then the intents of the new keys, in one statement: the first
    -- row of an event in the batch counts, later ones are its duplicates. The
    -- keys are inserted in their order, so that two batches sharing events
    -- wait for each other rather than deadlock. In the distributed mode both
    -- tables have bucket first (%1$s, %2$s).
    EXECUTE format($q$
        WITH rows AS (
            SELECT t.n, t.event_id, t.channel, t.payload, t.occurred_at, t.not_before, t.ordering_key,
                   c.provider, c.max_payload, c.policy, c.policy_override,
                   effectd.dedupe_key(t.channel, t.event_id) AS key,
                   row_number() OVER (PARTITION BY t.channel, t.event_id ORDER BY t.n) AS nth
            FROM unnest($1) WITH ORDINALITY AS t(event_id, channel, payload, occurred_at, not_before, ordering_key, n)
            JOIN effectd.channels c ON c.name = t.channel
            WHERE NOT $2[t.n]
        ),
        keyed AS (
            INSERT INTO effectd.dedupe_keys AS k (%1$s key, day, until)
            SELECT %2$s r.key, $3, $3 + effectd.dedupe_days(r.policy, r.policy_override)
            FROM rows r
            WHERE r.nth = 1
            ORDER BY r.key
            ON CONFLICT DO NOTHING
            RETURNING k.key
        ),
        added AS (
            INSERT INTO effectd.intents AS i (%1$s event_id, channel, payload, idempotency_key, next_attempt_at, occurred_at, ordering_key)
            SELECT %2$s r.event_id, r.channel,
                   CASE WHEN pg_column_size(r.payload) <= r.max_payload AND effectd.payload_ok(r.provider, r.payload) THEN r.payload
                        ELSE effectd.checked_payload(r.provider, r.max_payload, r.payload) END,
                   CASE WHEN octet_length(r.channel) + 1 + octet_length(r.event_id) <= 255
                        THEN r.channel || ':' || r.event_id
                        ELSE effectd.idempotency_key(r.channel, r.event_id) END,
                   CASE WHEN r.not_before > now() THEN r.not_before ELSE now() END,
                   r.occurred_at, r.ordering_key
            FROM rows r JOIN keyed k ON k.key = r.key
            WHERE r.nth = 1
            ORDER BY r.n
            ON CONFLICT DO NOTHING
            RETURNING i.channel, i.event_id
        )
        SELECT array_agg(r.n::int), array_agg(DISTINCT r.channel)
        FROM added a JOIN rows r ON r.channel = a.channel AND r.event_id = a.event_id AND r.nth = 1
    $q$, CASE WHEN b IS NULL THEN '' ELSE 'bucket,' END, CASE WHEN b IS NULL THEN '' ELSE b || ',' END)
    INTO fresh, woken
    USING intents, invalid, (now() AT TIME ZONE 'UTC')::date;

    IF woken IS NOT NULL THEN
        SELECT w.waiting INTO wake FROM effectd.wakeup w WHERE w.id = 1;
        IF wake THEN
            PERFORM pg_notify('effectd_wakeup', w) FROM unnest(woken) AS w;
        END IF;
    END IF;
    FOREACH i IN ARRAY coalesce(fresh, '{}') LOOP
        is_new[i] := true;
    END LOOP;
    -- (a subscript of an array that holds NULLs reads it from its start:
    -- the answer reads field and message as a set)
    RETURN QUERY
    SELECT e.o::int, CASE WHEN invalid[e.o] THEN 'invalid' WHEN is_new[e.o] THEN 'new' ELSE 'duplicate' END, e.f, e.m
    FROM unnest(bad_field, bad_msg) WITH ORDINALITY AS e(f, m, o)
    ORDER BY e.o;
END
$$;
-- +goose StatementEnd
