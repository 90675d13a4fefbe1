-- +goose Up
-- Input that can be stored can be sent: effectd.enqueue refuses (22023, naming
-- the field) every value a later step could not carry. Each check is its own
-- function, which enqueue calls; enqueue itself keeps its one-statement insert.

-- check_time refuses a timestamp that Go's time.Time and RFC 3339 JSON cannot
-- carry: infinity, -infinity, and instants outside years 0001..9999 (UTC).
-- +goose StatementBegin
CREATE FUNCTION effectd.check_time(field text, ts timestamptz) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF ts IS NULL THEN
        RETURN;
    END IF;
    IF NOT isfinite(ts) THEN
        PERFORM effectd.refuse(field, 'must be a finite time, got ' || ts::text);
    ELSIF ts < '0001-01-01 00:00:00+00' OR ts >= '10000-01-01 00:00:00+00' THEN
        PERFORM effectd.refuse(field, 'must fall within the years 0001 to 9999 (UTC)');
    END IF;
END
$$;
-- +goose StatementEnd

-- check_header_text refuses text that cannot travel in an HTTP header as is:
-- control characters (U+0001..U+001F, U+007F..U+009F) anywhere, and white space
-- at either end (a header value's ends are trimmed, so "a" and "a " would meet
-- as one key). White space is Unicode's White_Space property.
-- +goose StatementBegin
CREATE FUNCTION effectd.check_header_text(field text, v text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF v ~ '[\u0001-\u001f\u007f-\u009f]' THEN
        PERFORM effectd.refuse(field, 'must not contain control characters (an HTTP header cannot carry them)');
    ELSIF v ~ '^[ \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]'
       OR v ~ '[ \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]$' THEN
        PERFORM effectd.refuse(field, 'must not begin or end with white space (an HTTP header trims it)');
    END IF;
END
$$;
-- +goose StatementEnd

-- check_depth refuses a payload nested deeper than 32 levels of objects and
-- arrays (the payload object is level 1): some object or array sits 32 levels
-- below the top.
-- +goose StatementBegin
CREATE FUNCTION effectd.check_depth(payload jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF jsonb_path_exists(payload, 'strict $.**{32} ? (@.type() == "object" || @.type() == "array")') THEN
        PERFORM effectd.refuse('payload', 'is nested deeper than 32 levels of objects and arrays');
    END IF;
END
$$;
-- +goose StatementEnd

-- only_keys refuses a payload with a key that is not in keys: a field the
-- provider's sender does not know would be silently dropped.
-- +goose StatementBegin
CREATE FUNCTION effectd.only_keys(payload jsonb, keys text[], what text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE k text;
BEGIN
    SELECT key INTO k FROM jsonb_object_keys(payload) AS key WHERE key <> ALL (keys) ORDER BY key LIMIT 1;
    IF FOUND THEN
        PERFORM effectd.refuse('payload.' || left(k, 64), 'is not a field of ' || what || ' (known: ' || array_to_string(keys, ', ') || ')');
    END IF;
END
$$;
-- +goose StatementEnd

-- positive_int refuses a payload field that is present but not a positive
-- integer written without fraction or exponent that fits in 64 bits, or absent
-- when required. JSON null counts as absent.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION effectd.positive_int(payload jsonb, field text, required boolean) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE v jsonb := payload -> field;
BEGIN
    IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
        IF required THEN PERFORM effectd.refuse('payload.' || field, 'is required'); END IF;
        RETURN;
    END IF;
    IF jsonb_typeof(v) <> 'number' OR v::text !~ '^[0-9]{1,19}$'
       OR (v::text)::numeric <= 0 OR (v::text)::numeric > 9223372036854775807 THEN
        PERFORM effectd.refuse('payload.' || field, 'must be a positive integer (at most 9223372036854775807), got ' || left(v::text, 40));
    END IF;
END
$$;
-- +goose StatementEnd

-- matching refuses a payload field that is present but not a string matching
-- pattern (described by what), or absent when required. JSON null counts as absent.
-- +goose StatementBegin
CREATE FUNCTION effectd.matching(payload jsonb, field text, required boolean, pattern text, what text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE v jsonb := payload -> field;
BEGIN
    IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
        IF required THEN PERFORM effectd.refuse('payload.' || field, 'is required'); END IF;
        RETURN;
    END IF;
    IF jsonb_typeof(v) <> 'string' OR v #>> '{}' !~ pattern THEN
        PERFORM effectd.refuse('payload.' || field, 'must be ' || what || ', got ' || left(v::text, 40));
    END IF;
END
$$;
-- +goose StatementEnd

-- boolean refuses a payload field that is present but neither true, false nor null.
-- +goose StatementBegin
CREATE FUNCTION effectd.boolean(payload jsonb, field text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF jsonb_typeof(payload -> field) NOT IN ('boolean', 'null') THEN
        PERFORM effectd.refuse('payload.' || field, 'must be true or false, got ' || left((payload -> field)::text, 40));
    END IF;
END
$$;
-- +goose StatementEnd

-- validate_payload refuses a payload that the channel's provider cannot send.
-- The same rules are in the Go senders (providers/stripe, providers/twilio);
-- a table-driven test and a fuzz target hold the two to the same verdicts.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION effectd.validate_payload(provider text, payload jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    kind      text;
    stripe_id constant text := '^[A-Za-z0-9_]{1,255}$';
    stripe_id_what constant text := 'a Stripe id (letters, digits and _)';
    e164      constant text := '^\+[1-9][0-9]{6,14}$';
BEGIN
    CASE provider
    WHEN 'webhook' THEN
        RETURN; -- any JSON object is a webhook body
    WHEN 'twilio' THEN
        PERFORM effectd.only_keys(payload, ARRAY['to', 'body', 'from'], 'an SMS');
        PERFORM effectd.matching(payload, 'to', true, e164, 'a phone number in E.164 form (+ and 7 to 15 digits)');
        PERFORM effectd.matching(payload, 'body', true, '^.', 'a non-empty string');
        PERFORM effectd.matching(payload, 'from', false, '^(\+[1-9][0-9]{6,14}|[0-9]{5,6}|[A-Za-z][A-Za-z0-9 ]{0,10})$',
                                 'a phone number in E.164 form, a short code or an alphanumeric sender id');
        IF length(payload ->> 'body') > 1600 THEN
            PERFORM effectd.refuse('payload.body', 'is longer than 1600 characters');
        END IF;
    WHEN 'stripe' THEN
        PERFORM effectd.matching(payload, 'type', true, '^.', 'refund, payment_intent or transfer');
        kind := payload ->> 'type';
        CASE kind
        WHEN 'refund' THEN
            PERFORM effectd.only_keys(payload, ARRAY['type', 'payment_intent', 'charge', 'amount', 'reason'], 'a refund');
            IF jsonb_typeof(payload -> 'payment_intent') IS DISTINCT FROM 'string'
               AND jsonb_typeof(payload -> 'charge') IS DISTINCT FROM 'string' THEN
                PERFORM effectd.refuse('payload.payment_intent', 'a refund needs payment_intent or charge');
            END IF;
            PERFORM effectd.matching(payload, 'payment_intent', false, stripe_id, stripe_id_what);
            PERFORM effectd.matching(payload, 'charge', false, stripe_id, stripe_id_what);
            PERFORM effectd.positive_int(payload, 'amount', false);
            PERFORM effectd.matching(payload, 'reason', false, '^(duplicate|fraudulent|requested_by_customer)$',
                                     'duplicate, fraudulent or requested_by_customer');
        WHEN 'payment_intent' THEN
            PERFORM effectd.only_keys(payload, ARRAY['type', 'amount', 'currency', 'customer', 'payment_method', 'confirm', 'off_session'], 'a payment_intent');
            PERFORM effectd.positive_int(payload, 'amount', true);
            PERFORM effectd.matching(payload, 'currency', true, '^[A-Za-z]{3}$', 'a three-letter ISO currency code');
            PERFORM effectd.matching(payload, 'customer', false, stripe_id, stripe_id_what);
            PERFORM effectd.matching(payload, 'payment_method', false, stripe_id, stripe_id_what);
            PERFORM effectd.boolean(payload, 'confirm');
            PERFORM effectd.boolean(payload, 'off_session');
        WHEN 'transfer' THEN
            PERFORM effectd.only_keys(payload, ARRAY['type', 'amount', 'currency', 'destination'], 'a transfer');
            PERFORM effectd.positive_int(payload, 'amount', true);
            PERFORM effectd.matching(payload, 'currency', true, '^[A-Za-z]{3}$', 'a three-letter ISO currency code');
            PERFORM effectd.matching(payload, 'destination', true, stripe_id, stripe_id_what);
        ELSE
            PERFORM effectd.refuse('payload.type', 'must be refund, payment_intent or transfer, got ' || quote_literal(left(kind, 40)));
        END CASE;
    ELSE
        PERFORM effectd.refuse('channel', 'unknown provider ' || quote_literal(provider));
    END CASE;
END
$$;
-- +goose StatementEnd

-- check_arguments refuses the arguments of enqueue that no channel could send:
-- an empty, over-long or header-unsafe event_id, an empty channel, a payload
-- that is not an object or is nested too deep, an empty or over-long
-- ordering_key, and times Go cannot carry.
-- +goose StatementBegin
CREATE FUNCTION effectd.check_arguments(
    event_id text, channel text, payload jsonb,
    occurred_at timestamptz, not_before timestamptz, ordering_key text
) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF event_id IS NULL OR event_id = '' THEN
        PERFORM effectd.refuse('event_id', 'must not be empty');
    ELSIF octet_length(event_id) > 255 THEN
        PERFORM effectd.refuse('event_id', 'is ' || octet_length(event_id) || ' bytes, more than 255');
    END IF;
    PERFORM effectd.check_header_text('event_id', event_id);
    IF channel IS NULL OR channel = '' THEN
        PERFORM effectd.refuse('channel', 'must not be empty');
    END IF;
    IF jsonb_typeof(payload) IS DISTINCT FROM 'object' THEN
        PERFORM effectd.refuse('payload', 'must be a JSON object');
    END IF;
    PERFORM effectd.check_depth(payload);
    IF ordering_key = '' THEN
        PERFORM effectd.refuse('ordering_key', 'must be NULL or non-empty');
    ELSIF octet_length(ordering_key) > 255 THEN
        PERFORM effectd.refuse('ordering_key', 'is ' || octet_length(ordering_key) || ' bytes, more than 255');
    END IF;
    PERFORM effectd.check_time('occurred_at', occurred_at);
    PERFORM effectd.check_time('not_before', not_before);
END
$$;
-- +goose StatementEnd

-- The payload rules once more as SQL expressions that PostgreSQL inlines into
-- enqueue, so that a good payload costs no PL/pgSQL call: payload_ok is true
-- only for a payload validate_payload accepts; when it is not true,
-- validate_payload runs and names the field. (An amount of 19 digits takes the
-- long way.) TestPayloadParity and FuzzPayloadParity judge enqueue, and so both.
-- +goose StatementBegin
CREATE FUNCTION effectd.opt_str(v jsonb, pattern text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT v IS NULL OR jsonb_typeof(v) = 'null' OR (jsonb_typeof(v) = 'string' AND v #>> '{}' ~ pattern)
$$;
CREATE FUNCTION effectd.req_str(v jsonb, pattern text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_typeof(v) = 'string' AND v #>> '{}' ~ pattern
$$;
-- A Stripe id; {1,255} inside the pattern would make PostgreSQL's regex slow.
CREATE FUNCTION effectd.opt_id(v jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT v IS NULL OR jsonb_typeof(v) = 'null'
        OR (jsonb_typeof(v) = 'string' AND v #>> '{}' ~ '^[A-Za-z0-9_]+$' AND octet_length(v #>> '{}') <= 255)
$$;
CREATE FUNCTION effectd.req_int(v jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_typeof(v) = 'number' AND v::text ~ '^[1-9][0-9]{0,17}$'
$$;
CREATE FUNCTION effectd.opt_int(v jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT v IS NULL OR jsonb_typeof(v) = 'null' OR (jsonb_typeof(v) = 'number' AND v::text ~ '^[1-9][0-9]{0,17}$')
$$;
CREATE FUNCTION effectd.opt_bool(v jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT v IS NULL OR jsonb_typeof(v) IN ('null', 'boolean')
$$;
CREATE FUNCTION effectd.payload_ok(provider text, payload jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE provider
    WHEN 'webhook' THEN true
    WHEN 'twilio' THEN
        payload - ARRAY['to', 'body', 'from'] = '{}'::jsonb
        AND effectd.req_str(payload -> 'to', '^\+[1-9][0-9]{6,14}$')
        AND effectd.req_str(payload -> 'body', '^.') AND length(payload ->> 'body') <= 1600
        AND effectd.opt_str(payload -> 'from', '^(\+[1-9][0-9]{6,14}|[0-9]{5,6}|[A-Za-z][A-Za-z0-9 ]{0,10})$')
    WHEN 'stripe' THEN
        CASE payload ->> 'type'
        WHEN 'refund' THEN
            payload - ARRAY['type', 'payment_intent', 'charge', 'amount', 'reason'] = '{}'::jsonb
            AND (jsonb_typeof(payload -> 'payment_intent') = 'string' OR jsonb_typeof(payload -> 'charge') = 'string')
            AND effectd.opt_id(payload -> 'payment_intent')
            AND effectd.opt_id(payload -> 'charge')
            AND effectd.opt_int(payload -> 'amount')
            AND effectd.opt_str(payload -> 'reason', '^(duplicate|fraudulent|requested_by_customer)$')
        WHEN 'payment_intent' THEN
            payload - ARRAY['type', 'amount', 'currency', 'customer', 'payment_method', 'confirm', 'off_session'] = '{}'::jsonb
            AND effectd.req_int(payload -> 'amount')
            AND effectd.req_str(payload -> 'currency', '^[A-Za-z]{3}$')
            AND effectd.opt_id(payload -> 'customer')
            AND effectd.opt_id(payload -> 'payment_method')
            AND effectd.opt_bool(payload -> 'confirm') AND effectd.opt_bool(payload -> 'off_session')
        WHEN 'transfer' THEN
            payload - ARRAY['type', 'amount', 'currency', 'destination'] = '{}'::jsonb
            AND effectd.req_int(payload -> 'amount')
            AND effectd.req_str(payload -> 'currency', '^[A-Za-z]{3}$')
            AND jsonb_typeof(payload -> 'destination') = 'string' AND effectd.opt_id(payload -> 'destination')
        ELSE false END
    ELSE false END
$$;
-- +goose StatementEnd

-- arguments_ok is check_arguments' verdict in one SQL expression, which
-- PostgreSQL inlines into enqueue: the common path pays for no function call,
-- and check_arguments runs (to name the field) only when this is not true.
-- The abuse tests pass every refused value through both.
-- +goose StatementBegin
CREATE FUNCTION effectd.arguments_ok(
    event_id text, channel text, payload jsonb,
    occurred_at timestamptz, not_before timestamptz, ordering_key text
) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT octet_length(event_id) BETWEEN 1 AND 255
       AND event_id !~ '[\u0001-\u001f\u007f-\u009f]|^[ \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]|[ \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]$'
       AND channel <> ''
       AND jsonb_typeof(payload) = 'object'
       AND NOT jsonb_path_exists(payload, 'strict $.**{32} ? (@.type() == "object" || @.type() == "array")')
       AND (ordering_key IS NULL OR octet_length(ordering_key) BETWEEN 1 AND 255)
       AND (occurred_at IS NULL OR (occurred_at >= '0001-01-01 00:00:00+00' AND occurred_at < '10000-01-01 00:00:00+00'))
       AND (not_before IS NULL OR (not_before >= '0001-01-01 00:00:00+00' AND not_before < '10000-01-01 00:00:00+00'))
$$;
-- +goose StatementEnd

-- enqueue records an intent inside the caller's transaction. It returns true when
-- the intent is new and false for a duplicate (event_id, channel), which changes nothing.
-- It runs in every producer transaction, so its common path is one statement:
-- the insert reads the channel, checks the payload and reads the wake-up flag.
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
        SELECT coalesce(c.policy_override ->> 'retention', c.policy ->> 'retention', '360h')::interval INTO retention
        FROM effectd.channels c WHERE c.name = channel;
        IF occurred_at < now() - retention THEN
            PERFORM effectd.refuse('occurred_at', 'is older than the channel''s retention (' || retention || '): a copy older than the dedupe window is not sent again');
        END IF;
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
    ON CONFLICT ON CONSTRAINT intents_event_channel DO NOTHING
    RETURNING (SELECT w.waiting FROM effectd.wakeup w WHERE w.id = 1) INTO wake;
    IF FOUND THEN
        IF wake THEN
            PERFORM pg_notify('effectd_wakeup', channel);
        END IF;
        RETURN true;
    END IF;
    -- Nothing inserted: a duplicate (whose payload was still checked), or an unknown channel.
    IF NOT EXISTS (SELECT 1 FROM effectd.channels c WHERE c.name = channel) THEN
        PERFORM effectd.refuse('channel', 'unknown channel ' || quote_literal(left(channel, 64)));
    END IF;
    RETURN false;
END
$$;
-- +goose StatementEnd
