-- +goose Up
-- A provider event is stored once per channel, not once per provider. Stripe
-- sends every event of an account to each of its webhook endpoints (one per
-- channel), and a validly signed Twilio callback may be posted to another
-- channel's URL first: unique per provider, the copy that arrived first (kept
-- there as an orphan) made the one on the event's own channel a duplicate, and
-- the intent never learnt its delivery. The constraint keeps its name, so that
-- record_event.sql (ON CONFLICT ON CONSTRAINT provider_events_unique) reads the
-- same before and after. Building the new index holds the table's lock: ingress
-- waits for it (the providers retry; polling covers what they do not).
ALTER TABLE effectd.provider_events
    DROP CONSTRAINT provider_events_unique,
    ADD CONSTRAINT provider_events_unique UNIQUE (provider, channel, event_id);
