-- +goose Up
-- A notification is a copy of its source intent on another channel, read by
-- that channel's viewers and operators, logged and echoed by its receiver: it
-- must not carry what the source channel redacts. The error text it copies
-- (last_error, which may quote the payload, e.g. "… +15557654321 is not a
-- valid phone number") is written with the value of each field the source
-- channel redacts replaced by "***", as the admin API masks it for a viewer of
-- the source. Notifications written before are masked the same way; one whose
-- source is gone has its copied error masked whole.

-- redact_text returns s with the value of each of payload's fields named in
-- fields (as text, and as it is written inside a JSON string) replaced by
-- "***"; values under 3 bytes are left alone. It is dispatcher.RedactText in
-- SQL, and a test keeps the two alike.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION effectd.redact_text(s text, payload jsonb, fields text[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    f text;
    v text;
BEGIN
    IF s IS NULL OR s = '' OR coalesce(cardinality(fields), 0) = 0 OR jsonb_typeof(payload) IS DISTINCT FROM 'object' THEN
        RETURN s;
    END IF;
    FOREACH f IN ARRAY fields LOOP
        CONTINUE WHEN f IS NULL OR NOT payload ? f;
        FOREACH v IN ARRAY ARRAY[
            CASE WHEN jsonb_typeof(payload -> f) = 'null' THEN '' ELSE payload ->> f END,
            btrim((payload -> f)::text, '"')] LOOP
            IF octet_length(v) >= 3 THEN
                s := replace(s, v, '***');
            END IF;
        END LOOP;
    END LOOP;
    RETURN s;
END
$$;
-- +goose StatementEnd

-- notify_outcomes runs after every UPDATE of intents, in its transaction: for
-- each row whose status or delivery changed to an outcome its channel's notify
-- lists, it enqueues one webhook intent on the notify channel (event id
-- <idempotency_key>:<outcome>, so each outcome is told once; ordering key the
-- source's idempotency key, so they arrive in order), whose last_error has the
-- source channel's redacted values masked. A notification that cannot be
-- enqueued is logged as a warning and never undoes the change it reports.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION effectd.notify_outcomes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE r record;
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
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- The notifications already written, on the channels notifications go to:
-- each copied error of a source whose channel redacts fields, masked.
UPDATE effectd.intents n
SET payload = jsonb_set(n.payload, '{intent,last_error}', to_jsonb(m.masked))
FROM (
    SELECT note.id,
           CASE WHEN src.id IS NULL THEN '***'
                ELSE effectd.redact_text(note.payload #>> '{intent,last_error}', src.payload, ch.redact) END AS masked
    FROM effectd.intents note
    JOIN effectd.channels ch ON ch.name = note.payload #>> '{intent,channel}' AND cardinality(ch.redact) > 0
    LEFT JOIN effectd.intents src ON src.channel = ch.name
        AND src.id = CASE WHEN note.payload #>> '{intent,id}' ~ '^[0-9]{1,18}$' THEN (note.payload #>> '{intent,id}')::bigint END
    WHERE note.channel IN (SELECT notify ->> 'channel' FROM effectd.channels WHERE notify IS NOT NULL)
      AND note.payload ->> 'type' LIKE 'effect.%'
      AND jsonb_typeof(note.payload #> '{intent,last_error}') = 'string'
) m
WHERE n.id = m.id AND m.masked IS DISTINCT FROM n.payload #>> '{intent,last_error}';
