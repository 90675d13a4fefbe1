-- +goose Up
-- A notification to the producer joins its source intent's trace
-- (docs/tracing.md): the notification intent keeps the source's traceparent,
-- so that its attempts are spans of the trace the source's producer started,
-- beside the source's own attempts, polls and events. A source without one
-- leaves the notification the trace of the transaction that writes it (022's
-- column default: the transaction's effectd.traceparent), as before.
--
-- On one PostgreSQL the notify trigger writes notifications through
-- effectd.enqueue, whose column default reads effectd.traceparent: the
-- trigger sets it to each source's traceparent for that enqueue and gives
-- the transaction its own value back afterwards, so that what the
-- transaction enqueues next (a producer's cancel, then its enqueue) keeps the
-- producer's trace. In the distributed mode the statements that move intents
-- write the source's traceparent themselves (notices_bucket.sql), and cancel
-- (below) does so on a bucket.

-- traceparent_setting is the transaction's effectd.traceparent when it is a
-- version-00 W3C traceparent in lower-case hex, NULL otherwise: what 022's
-- column default keeps.
-- +goose StatementBegin
CREATE FUNCTION effectd.traceparent_setting() RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN current_setting('effectd.traceparent', true) ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
                THEN current_setting('effectd.traceparent', true) END
$$;
-- +goose StatementEnd

-- notify_outcomes as in 009, each notification enqueued under its source's
-- traceparent (when it has one), the transaction's setting given back after.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION effectd.notify_outcomes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    r      record;
    caller text := current_setting('effectd.traceparent', true);
    traced boolean := false;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM effectd.channels WHERE notify IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    FOR r IN
        SELECT n.*, c.notify ->> 'channel' AS target, c.redact AS redacted, o.outcome
        FROM new_rows n
        JOIN old_rows p ON p.id = n.id
        JOIN effectd.channels c ON c.name = n.channel AND c.notify IS NOT NULL
        CROSS JOIN LATERAL (VALUES
            (1, CASE WHEN n.status IS DISTINCT FROM p.status THEN lower(n.status) END),
            (2, CASE WHEN n.delivery IS DISTINCT FROM p.delivery THEN n.delivery END)) AS o(ord, outcome)
        WHERE o.outcome IS NOT NULL AND (c.notify -> 'on') ? o.outcome
        ORDER BY n.id, o.ord
    LOOP
        BEGIN
            -- the notification's traceparent (the column default): the
            -- source's, else the transaction's own
            PERFORM set_config('effectd.traceparent', coalesce(r.traceparent, caller, ''), true);
            traced := true;
            PERFORM effectd.enqueue(
                event_id     => effectd.notify_key(r.idempotency_key, r.outcome),
                channel      => r.target,
                payload      => jsonb_build_object(
                    'type', 'effect.' || r.outcome,
                    'intent', jsonb_build_object(
                        'id', r.id, 'event_id', r.event_id, 'channel', r.channel, 'status', r.status,
                        'delivery', r.delivery, 'delivery_detail', r.delivery_detail,
                        'provider_ref', r.provider_ref,
                        'last_error', effectd.redact_text(r.last_error, r.payload, r.redacted))),
                ordering_key => r.idempotency_key);
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'effectd: notify % of intent % on channel %: %', r.outcome, r.id, r.target, SQLERRM;
        END;
    END LOOP;
    IF traced THEN
        PERFORM set_config('effectd.traceparent', coalesce(caller, ''), true);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- cancel as in 021, its notification on a bucket keeping the source's
-- traceparent (else the transaction's, as the trigger does on one node).
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
CREATE OR REPLACE FUNCTION effectd.cancel(event_id text, channel text, reason text, bucket bigint DEFAULT NULL) RETURNS text
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
                INSERT INTO effectd.intents (bucket, event_id, channel, payload, idempotency_key, next_attempt_at, ordering_key,
                                             traceparent)
                VALUES (bucket, note, c.notify ->> 'channel', notice,
                        CASE WHEN octet_length(c.notify ->> 'channel') + 1 + octet_length(note) <= 255
                             THEN (c.notify ->> 'channel') || ':' || note
                             ELSE effectd.idempotency_key(c.notify ->> 'channel', note) END,
                        now(), r.idempotency_key, coalesce(r.traceparent, effectd.traceparent_setting()))
                ON CONFLICT DO NOTHING;
            END IF;
        END IF;
    END IF;
    RETURN 'CANCELLED';
END
$$;
-- +goose StatementEnd
