-- +goose Up
-- Two-person approval (docs/console.md, "Two-person approval"): on a channel
-- whose policy says approval: two-person, an operator's resolve as sent or
-- skip, a send forced past the provider's key window, a bulk action over the
-- channel's approval_bulk_threshold and a change of the channel's policy
-- become a request here, with a reason. Another principal with the approve
-- right on the channel approves it (the action then runs in the same
-- transaction as the request's state change, fenced as the direct action is)
-- or rejects it; a request undecided by expires_at expires.
--
-- A request names what the requester was shown: the intent (intent_id and
-- event_id, its status, attempts and idempotency key) of an intent action,
-- the snapshot of a bulk action, the override a policy change was made
-- against (in parameters). Approval refuses, marking the request failed with
-- the reason in outcome, when any of them moved on.
--
-- A few rows a day per channel, written and read only by effectd through
-- the coordinator: in the distributed mode it stays a table of the
-- coordinator, as the audit log does (migrations/citus/distribute.sql, step
-- 5), never a reference table (each write would go to every node) nor
-- distributed (no worker reads it, and its writes commit with the intent's
-- on the coordinator's transaction). The operators' queue reads the pending
-- requests of their channels through approval_requests_pending, a partial
-- index that holds only pending rows, so the queue costs the same however
-- many decided requests are kept.
CREATE TABLE effectd.approval_requests (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel         text        NOT NULL,
    action          text        NOT NULL CHECK (action IN ('intent.resolve_sent', 'intent.resolve_skip',
                                    'intent.resolve_send', 'intent.requeue', 'bulk.apply', 'channel.policy')),
    intent_id       bigint,
    event_id        text,
    intent_status   text,
    intent_attempts int,
    idempotency_key text,
    parameters      jsonb       NOT NULL DEFAULT '{}',
    reason          text        NOT NULL CHECK (reason <> ''),
    requester       text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    state           text        NOT NULL DEFAULT 'pending'
                                CHECK (state IN ('pending', 'approved', 'rejected', 'expired', 'failed')),
    decider         text,
    decision_reason text,
    decided_at      timestamptz,
    outcome         text,
    CHECK ((state = 'pending') = (decided_at IS NULL)),
    CHECK (state NOT IN ('approved', 'rejected', 'failed') OR decider IS NOT NULL),
    CHECK (decider IS DISTINCT FROM requester),
    CHECK ((intent_id IS NULL) = (action NOT LIKE 'intent.%'))
);
CREATE INDEX approval_requests_pending ON effectd.approval_requests (channel, id) WHERE state = 'pending';
