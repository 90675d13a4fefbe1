-- +goose Up
-- Why an operator acted, and which bulk snapshot the action came from.
ALTER TABLE effectd.audit ADD COLUMN IF NOT EXISTS reason text;
ALTER TABLE effectd.audit ADD COLUMN IF NOT EXISTS bulk_snapshot uuid;

-- A bulk action's frozen selection: POST /v1/intents/bulk records which intents
-- matched, in which state, and the apply acts on exactly those rows, each only
-- if it is still in that state.
CREATE TABLE effectd.bulk_snapshots (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    action      text NOT NULL CHECK (action IN ('retry', 'cancel', 'resolve')),
    resolve_as  text CHECK (resolve_as IN ('resend', 'skip')),
    filter      jsonb NOT NULL,
    reason      text NOT NULL CHECK (octet_length(reason) BETWEEN 1 AND 1000),
    actor       text NOT NULL,
    matched     int NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    applied_at  timestamptz,
    applied_by  text,
    applied     int,
    skipped     int
);
CREATE INDEX bulk_snapshots_expires ON effectd.bulk_snapshots (expires_at);

CREATE TABLE effectd.bulk_rows (
    snapshot  uuid NOT NULL REFERENCES effectd.bulk_snapshots (id) ON DELETE CASCADE,
    intent_id bigint NOT NULL,
    status    text NOT NULL,
    attempts  int NOT NULL,
    PRIMARY KEY (snapshot, intent_id)
);

-- The console's sessions (alexedwards/scs), shared by every instance behind a
-- load balancer. token is a random 43-character session id.
CREATE TABLE effectd.console_sessions (
    token  text PRIMARY KEY,
    data   bytea NOT NULL,
    expiry timestamptz NOT NULL
);
CREATE INDEX console_sessions_expiry ON effectd.console_sessions (expiry);
