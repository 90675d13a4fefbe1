-- +goose Up
-- Why an operator took an action, in its own column (resolve and bulk actions require one).
ALTER TABLE effectd.audit ADD COLUMN IF NOT EXISTS reason text;

-- Payload fields that viewers of the admin API see as "***"; registered from the YAML.
ALTER TABLE effectd.channels ADD COLUMN redact text[] NOT NULL DEFAULT '{}';

-- Producer roles and the channels each may enqueue into, written by
-- `effectd migrate --config` from access.producers. Empty: no producer roles.
-- With producer roles, migrate also makes effectd.enqueue SECURITY DEFINER with
-- a fixed search_path (migrations.SetProducers); without, it stays as it was.
CREATE TABLE effectd.producers (
    role     name PRIMARY KEY,
    channels text[] NOT NULL, -- shell-style globs, as written in the YAML
    patterns text[] NOT NULL  -- the same globs as anchored regular expressions
);

-- caller is the role a session is acting as when it calls effectd.enqueue: the
-- role it switched to with SET ROLE (or SET LOCAL ROLE), else the role it logged
-- in as. Inside a SECURITY DEFINER function current_user is the owner, so the
-- caller is read from the session.
-- +goose StatementBegin
CREATE FUNCTION effectd.caller() RETURNS name
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN current_setting('role') = 'none' THEN session_user ELSE current_setting('role')::name END
$$;
-- +goose StatementEnd

-- check_producer refuses (42501, naming the channel) an intent that the caller
-- may not record. A role that may insert into effectd.intents itself (effectd's
-- owner or service role, or a producer granted table rights as before producer
-- roles existed) may record any channel; any other role only the channels that
-- access.producers lists for a role whose rights it has (itself, or one it is an
-- inheriting member of: the rule PostgreSQL applies to the EXECUTE grant).
-- +goose StatementBegin
CREATE FUNCTION effectd.check_producer(channel text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE who name := effectd.caller();
BEGIN
    IF has_table_privilege(who, 'effectd.intents', 'INSERT') THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM effectd.producers p JOIN pg_roles r ON r.rolname = p.role
               WHERE pg_has_role(who, r.oid, 'USAGE') AND channel ~ ANY (p.patterns)) THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'effectd.enqueue: channel: role % may not enqueue into channel %', quote_ident(who), quote_literal(left(channel, 64))
        USING ERRCODE = '42501', COLUMN = 'channel',
              HINT = 'list the channel for this role in access.producers and run effectd migrate --config';
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION effectd.intents_check_producer() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM effectd.check_producer(NEW.channel);
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- Every new intent, whichever way it comes in, passes the producer check. The
-- check functions name everything by schema and run either inside
-- effectd.enqueue, whose search_path is fixed when it runs as its owner, or for a
-- role that may insert into the table itself; they carry no SET clause, which
-- would cost every enqueue a configuration change.
CREATE TRIGGER intents_check_producer BEFORE INSERT ON effectd.intents
    FOR EACH ROW EXECUTE FUNCTION effectd.intents_check_producer();
