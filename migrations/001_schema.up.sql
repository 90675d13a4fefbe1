-- +goose Up
-- Channels are registered from the YAML (migrate --config, serve). The SQL
-- function refuses intents for a channel that is not here.
CREATE TABLE effectd.channels (
    name            text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
    provider        text NOT NULL CHECK (provider IN ('webhook', 'stripe', 'twilio')),
    policy          jsonb NOT NULL DEFAULT '{}',   -- seeded from the YAML at every start
    policy_override jsonb NOT NULL DEFAULT '{}',   -- set through the admin API; survives restarts
    paused          boolean NOT NULL DEFAULT false,
    max_payload     int NOT NULL DEFAULT 65536 CHECK (max_payload > 0),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE effectd.intents (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id         text NOT NULL,
    channel          text NOT NULL,
    payload          jsonb NOT NULL,
    status           text NOT NULL DEFAULT 'PENDING'
                     CHECK (status IN ('PENDING','SENDING','SENT','FAILED','IN_DOUBT','SKIPPED','CANCELLED')),
    attempts         int NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    lease_expires_at timestamptz,
    claimed_at       timestamptz,
    idempotency_key  text NOT NULL,
    provider_ref     text,
    last_error       text,
    ordering_key     text,
    occurred_at      timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT intents_event_channel UNIQUE (event_id, channel)
);

-- The due-claim scan and the expired-lease scan each read a small partial index.
CREATE INDEX intents_due ON effectd.intents (channel, next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX intents_lease ON effectd.intents (lease_expires_at) WHERE status = 'SENDING';
-- Intents that share an ordering key are sent one at a time, oldest first.
CREATE INDEX intents_ordering ON effectd.intents (channel, ordering_key, id)
    WHERE ordering_key IS NOT NULL AND status IN ('PENDING', 'SENDING');
-- The pruner and the admin list by status.
CREATE INDEX intents_status_updated ON effectd.intents (status, updated_at);

-- One row per provider call or lookup.
CREATE TABLE effectd.attempts (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    intent_id    bigint NOT NULL,
    attempt      int NOT NULL,
    kind         text NOT NULL DEFAULT 'send' CHECK (kind IN ('send', 'lookup', 'operator')),
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    outcome      text NOT NULL,
    error        text,
    provider_ref text
);
CREATE INDEX attempts_intent ON effectd.attempts (intent_id, id);

-- A token bucket per rate-limited channel, shared by every instance: a claim
-- takes tokens in the same statement that claims rows.
CREATE TABLE effectd.rate_buckets (
    channel text PRIMARY KEY,
    tokens  double precision NOT NULL DEFAULT 0,
    at      timestamptz NOT NULL DEFAULT now()
);

-- Producers notify only while a dispatcher waits idle, so a busy system's
-- commits are never serialised by NOTIFY.
CREATE TABLE effectd.wakeup (
    id      int PRIMARY KEY CHECK (id = 1),
    waiting boolean NOT NULL DEFAULT false
);
INSERT INTO effectd.wakeup (id, waiting) VALUES (1, false);

-- Who changed what through the admin API.
CREATE TABLE effectd.audit (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at        timestamptz NOT NULL DEFAULT now(),
    actor     text NOT NULL,
    action    text NOT NULL,
    intent_id bigint,
    channel   text,
    before    jsonb,
    after     jsonb
);
CREATE INDEX audit_intent ON effectd.audit (intent_id, id) WHERE intent_id IS NOT NULL;

-- refuse raises invalid_parameter_value (22023) with a message naming the field.
-- +goose StatementBegin
CREATE FUNCTION effectd.refuse(field text, message text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RAISE EXCEPTION 'effectd.enqueue: %: %', field, message
        USING ERRCODE = '22023', COLUMN = field;
END
$$;
-- +goose StatementEnd

-- positive_int refuses a payload field that is present but not a positive integer,
-- or absent when required.
-- +goose StatementBegin
CREATE FUNCTION effectd.positive_int(payload jsonb, field text, required boolean) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE v jsonb := payload -> field;
BEGIN
    IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
        IF required THEN PERFORM effectd.refuse('payload.' || field, 'is required'); END IF;
        RETURN;
    END IF;
    IF jsonb_typeof(v) <> 'number' OR (v::text)::numeric <= 0 OR (v::text)::numeric <> trunc((v::text)::numeric) THEN
        PERFORM effectd.refuse('payload.' || field, 'must be a positive integer, got ' || left(v::text, 40));
    END IF;
END
$$;
-- +goose StatementEnd

-- nonempty_string refuses a payload field that is absent (when required) or not a non-empty string.
-- +goose StatementBegin
CREATE FUNCTION effectd.nonempty_string(payload jsonb, field text, required boolean) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE v jsonb := payload -> field;
BEGIN
    IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
        IF required THEN PERFORM effectd.refuse('payload.' || field, 'is required'); END IF;
        RETURN;
    END IF;
    IF jsonb_typeof(v) <> 'string' OR v #>> '{}' = '' THEN
        PERFORM effectd.refuse('payload.' || field, 'must be a non-empty string');
    END IF;
END
$$;
-- +goose StatementEnd

-- validate_payload refuses a payload that the channel's provider cannot send.
-- +goose StatementBegin
CREATE FUNCTION effectd.validate_payload(provider text, payload jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE kind text;
BEGIN
    CASE provider
    WHEN 'webhook' THEN
        RETURN; -- any JSON object is a webhook body
    WHEN 'twilio' THEN
        PERFORM effectd.nonempty_string(payload, 'to', true);
        PERFORM effectd.nonempty_string(payload, 'body', true);
        PERFORM effectd.nonempty_string(payload, 'from', false);
        IF length(payload ->> 'body') > 1600 THEN
            PERFORM effectd.refuse('payload.body', 'is longer than 1600 characters');
        END IF;
    WHEN 'stripe' THEN
        PERFORM effectd.nonempty_string(payload, 'type', true);
        kind := payload ->> 'type';
        CASE kind
        WHEN 'refund' THEN
            IF payload -> 'payment_intent' IS NULL AND payload -> 'charge' IS NULL THEN
                PERFORM effectd.refuse('payload.payment_intent', 'a refund needs payment_intent or charge');
            END IF;
            PERFORM effectd.nonempty_string(payload, 'payment_intent', false);
            PERFORM effectd.nonempty_string(payload, 'charge', false);
            PERFORM effectd.positive_int(payload, 'amount', false);
        WHEN 'payment_intent' THEN
            PERFORM effectd.positive_int(payload, 'amount', true);
            PERFORM effectd.nonempty_string(payload, 'currency', true);
        WHEN 'transfer' THEN
            PERFORM effectd.positive_int(payload, 'amount', true);
            PERFORM effectd.nonempty_string(payload, 'currency', true);
            PERFORM effectd.nonempty_string(payload, 'destination', true);
        ELSE
            PERFORM effectd.refuse('payload.type', 'must be refund, payment_intent or transfer, got ' || quote_literal(left(kind, 40)));
        END CASE;
    ELSE
        PERFORM effectd.refuse('channel', 'unknown provider ' || quote_literal(provider));
    END CASE;
END
$$;
-- +goose StatementEnd

-- idempotency_key derives the provider key of an intent: <channel>:<event_id>,
-- or <channel>:sha256:<hex> when that is longer than 255 bytes.
-- +goose StatementBegin
CREATE FUNCTION effectd.idempotency_key(channel text, event_id text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT CASE WHEN octet_length(channel || ':' || event_id) <= 255
                THEN channel || ':' || event_id
                ELSE channel || ':sha256:' || encode(sha256(convert_to(event_id, 'UTF8')), 'hex') END
$$;
-- +goose StatementEnd

-- checked_payload returns payload if the channel's provider can send it and it
-- fits the channel's size limit, and refuses it otherwise.
-- +goose StatementBegin
CREATE FUNCTION effectd.checked_payload(provider text, max_size int, payload jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF pg_column_size(payload) > max_size THEN
        PERFORM effectd.refuse('payload', 'is ' || pg_column_size(payload) || ' bytes, more than the limit of ' || max_size);
    END IF;
    PERFORM effectd.validate_payload(provider, payload);
    RETURN payload;
END
$$;
-- +goose StatementEnd

-- enqueue records an intent inside the caller's transaction. It returns true when
-- the intent is new and false for a duplicate (event_id, channel), which changes nothing.
-- It runs in every producer transaction, so its common path is one statement:
-- the insert reads the channel, checks the payload and reads the wake-up flag.
-- +goose StatementBegin
CREATE FUNCTION effectd.enqueue(
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
    IF event_id IS NULL OR event_id = '' THEN
        PERFORM effectd.refuse('event_id', 'must not be empty');
    ELSIF octet_length(event_id) > 255 THEN
        PERFORM effectd.refuse('event_id', 'is ' || octet_length(event_id) || ' bytes, more than 255');
    END IF;
    IF channel IS NULL OR channel = '' THEN
        PERFORM effectd.refuse('channel', 'must not be empty');
    END IF;
    IF jsonb_typeof(payload) IS DISTINCT FROM 'object' THEN
        PERFORM effectd.refuse('payload', 'must be a JSON object');
    END IF;
    IF ordering_key = '' THEN
        PERFORM effectd.refuse('ordering_key', 'must be NULL or non-empty');
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
           CASE WHEN c.provider = 'webhook' AND pg_column_size(payload) <= c.max_payload THEN payload
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
