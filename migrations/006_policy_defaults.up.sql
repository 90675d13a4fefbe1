-- +goose Up
-- A channel's policy is defined once, in Go (package policy): its defaults,
-- the YAML registered over them (effectd.channels.policy, which
-- dispatcher.Register writes whole, every field) and the admin API's override
-- (effectd.channels.policy_override). SQL spells no default of its own: the
-- defaults it may fall back on are the ones migrations.Up copies from package
-- policy into effectd.policy_defaults after every run, for a channel row
-- that holds no registered policy (one inserted by hand).
CREATE TABLE effectd.policy_defaults (
    id        boolean PRIMARY KEY DEFAULT true CHECK (id),  -- one row
    retention interval NOT NULL                             -- policy.DefaultRetention
);

-- channel_retention is a channel's effective retention, the one policy value
-- SQL reads: the admin API's override, else the registered policy, else the
-- default. NULL for an unknown channel.
-- +goose StatementBegin
CREATE FUNCTION effectd.channel_retention(channel text) RETURNS interval
LANGUAGE sql STABLE AS $$
    SELECT coalesce(
               coalesce(c.policy_override ->> 'retention', c.policy ->> 'retention')::interval,
               (SELECT d.retention FROM effectd.policy_defaults d))
    FROM effectd.channels c
    WHERE c.name = channel_retention.channel
$$;
-- +goose StatementEnd

-- enqueue as in 002, with the channel's retention read by channel_retention.
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
        retention := effectd.channel_retention(channel);
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
