-- +goose Up
-- What became of an intent after SENT: its delivery, as the provider reports it
-- (ingress events, polling) or as effectd knows it (a webhook answered 2xx).
ALTER TABLE effectd.intents
    ADD COLUMN delivery        text CHECK (delivery IN ('accepted', 'delivered', 'undelivered')),
    ADD COLUMN delivery_detail text,
    ADD COLUMN delivery_at     timestamptz;

-- Intents whose delivery is not final yet, for delivery polling.
CREATE INDEX intents_delivery_open ON effectd.intents (channel, updated_at)
    WHERE status = 'SENT' AND (delivery IS NULL OR delivery = 'accepted');

-- A provider event settles an in-doubt call (kind callback); a poll reads a status (kind poll).
ALTER TABLE effectd.attempts DROP CONSTRAINT IF EXISTS attempts_kind_check;
ALTER TABLE effectd.attempts ADD CONSTRAINT attempts_kind_check
    CHECK (kind IN ('send', 'lookup', 'operator', 'callback', 'poll'));

-- Every provider event received on the ingress listener, stored once. An event
-- that matches no intent is kept with intent_id NULL: an orphan.
CREATE TABLE effectd.provider_events (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider        text NOT NULL CHECK (provider IN ('twilio', 'stripe')),
    event_id        text NOT NULL,            -- Stripe's evt_…; for Twilio <MessageSid>:<MessageStatus>
    channel         text NOT NULL,
    intent_id       bigint,                   -- NULL: an orphan
    object_ref      text,                     -- SM…, re_…, pi_…, tr_…
    type            text NOT NULL,            -- Stripe's event type; for Twilio the message status
    status          text,                     -- the object's status as the provider reports it
    delivery        text,                     -- what the status means for the intent's delivery
    detail          text,
    outcome         text NOT NULL,            -- what the event changed: applied, settled, ignored: …, orphan
    payload         jsonb NOT NULL,
    received_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT provider_events_unique UNIQUE (provider, event_id)
);
CREATE INDEX provider_events_intent ON effectd.provider_events (intent_id, id) WHERE intent_id IS NOT NULL;
CREATE INDEX provider_events_orphan ON effectd.provider_events (id) WHERE intent_id IS NULL;

-- Where each channel tells its producer about outcomes: {"channel": "<webhook channel>", "on": ["sent", …]}.
ALTER TABLE effectd.channels ADD COLUMN notify jsonb;

-- notify_key is the event id of a notification: <idempotency_key>:<outcome>, or
-- sha256:<hex of the key>:<outcome> when that would exceed 255 bytes.
-- +goose StatementBegin
CREATE FUNCTION effectd.notify_key(key text, outcome text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT CASE WHEN octet_length(key) + 1 + octet_length(outcome) <= 255
                THEN key || ':' || outcome
                ELSE 'sha256:' || encode(sha256(convert_to(key, 'UTF8')), 'hex') || ':' || outcome END
$$;
-- +goose StatementEnd

-- notify_outcomes runs after every UPDATE of intents, in its transaction: for
-- each row whose status or delivery changed to an outcome its channel's notify
-- lists, it enqueues one webhook intent on the notify channel (event id
-- <idempotency_key>:<outcome>, so each outcome is told once; ordering key the
-- source's idempotency key, so they arrive in order). A notification that cannot
-- be enqueued is logged as a warning and never undoes the change it reports.
-- +goose StatementBegin
CREATE FUNCTION effectd.notify_outcomes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM effectd.channels WHERE notify IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    FOR r IN
        SELECT n.*, c.notify ->> 'channel' AS target, o.outcome
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
                        'provider_ref', r.provider_ref, 'last_error', r.last_error)),
                ordering_key => r.idempotency_key);
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'effectd: notify % of intent % on channel %: %', r.outcome, r.id, r.target, SQLERRM;
        END;
    END LOOP;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER intents_notify AFTER UPDATE ON effectd.intents
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION effectd.notify_outcomes();
