-- +goose Up
-- Indexes that let every operator read find its rows without reading history
-- (docs/scale.md). Their predicates hold only for rare states and deliveries
-- (and a stored provider reference), so a claim writes to none of them.
--
-- They are built in migrate's transaction, which holds writes to the table
-- while it reads it. On a large table, build them first by hand with CREATE
-- INDEX CONCURRENTLY under the same names (README, "Reads at production
-- volume"): each statement here then finds its index and does nothing. They
-- are not built CONCURRENTLY here: such a build waits for every other
-- transaction, including another instance's migrate waiting on the migration
-- lock this one holds.

-- Rows in a rare settled state, or waiting for an operator: a list filtered by
-- one of these states, and the IN_DOUBT count, read only them, in id order
-- within a channel (a page of one channel, or of each channel in a scope) or
-- across channels.
CREATE INDEX IF NOT EXISTS intents_settled_rare ON effectd.intents (status, channel, id)
    WHERE status IN ('FAILED', 'SKIPPED', 'CANCELLED', 'IN_DOUBT');
CREATE INDEX IF NOT EXISTS intents_settled_rare_id ON effectd.intents (status, id)
    WHERE status IN ('FAILED', 'SKIPPED', 'CANCELLED', 'IN_DOUBT');

-- Deliveries that are rare at any moment: accepted (waiting for the provider's
-- word) and undelivered; the same two orders.
CREATE INDEX IF NOT EXISTS intents_delivery_rare ON effectd.intents (delivery, channel, id)
    WHERE delivery IN ('accepted', 'undelivered');
CREATE INDEX IF NOT EXISTS intents_delivery_rare_id ON effectd.intents (delivery, id)
    WHERE delivery IN ('accepted', 'undelivered');

-- A window of created_at (since, until): rows arrive in time order, so a block
-- range summary finds a window's pages in a few KB per GB. A range is
-- summarized as soon as the next one starts filling (autosummarize), so a
-- read also scans at most the newest 32 pages, whatever their times.
CREATE INDEX IF NOT EXISTS intents_created_brin ON effectd.intents USING brin (created_at)
    WITH (pages_per_range = 32, autosummarize = on);

-- Idempotency keys too long to be <channel>:<event_id> are hashed; a search by
-- one cannot be turned into the (event_id, channel) key.
CREATE INDEX IF NOT EXISTS intents_hashed_key ON effectd.intents (idempotency_key)
    WHERE idempotency_key LIKE '%:sha256:%';

-- A search by provider reference, and a provider event that names only its
-- object (query.EventIntent), find the intent through the reference.
CREATE INDEX IF NOT EXISTS intents_provider_ref ON effectd.intents (provider_ref)
    WHERE provider_ref IS NOT NULL;

-- A page of one channel's provider events, in id order.
CREATE INDEX IF NOT EXISTS provider_events_channel ON effectd.provider_events (channel, id);

-- A SENDING row always has a lease: the live counts read SENDING rows from
-- intents_lease, whose predicate requires one. Added unless an operator added
-- it first (NOT VALID, then VALIDATE, which lets writes go on).
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conname = 'intents_sending_leased' AND conrelid = 'effectd.intents'::regclass) THEN
        ALTER TABLE effectd.intents ADD CONSTRAINT intents_sending_leased
            CHECK (status <> 'SENDING' OR lease_expires_at IS NOT NULL);
    END IF;
END
$$;
-- +goose StatementEnd
