-- effectd.distribute_lookups gives the distributed intents the lookups the
-- reads need without a bucket (README, "Scale-out → On Citus"; docs/scale.md,
-- "The distributed mode", "Reads"). distribute.sql puts bucket in front of
-- every unique key of intents' partitions, as Citus requires, so (bucket, id)
-- and (bucket, event_id, channel) no longer serve a read that does not name a
-- bucket: a page in id order, one intent by id, an event id or an idempotency
-- key. A shard holds several buckets, so each of these read its shard whole.
-- Two plain indexes on the parent, (id) and (event_id, channel), serve them
-- again: made on every partition of every shard, and by PostgreSQL on each
-- partition attached later (add_partition). Citus allows non-unique indexes
-- without the distribution column. It runs after effectd.distribute
-- (migrations.Distribute), once: a second run finds them and does nothing.
CREATE OR REPLACE FUNCTION effectd.distribute_lookups() RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    done text[] := '{}';
BEGIN
    IF to_regclass('effectd.intents_id') IS NULL THEN
        CREATE INDEX intents_id ON effectd.intents (id);
        done := done || 'effectd.intents: index intents_id (id), for pages in id order and one intent by id without its bucket'::text;
    END IF;
    IF to_regclass('effectd.intents_event') IS NULL THEN
        CREATE INDEX intents_event ON effectd.intents (event_id, channel);
        done := done || 'effectd.intents: index intents_event (event_id, channel), for an event id or an idempotency key without its bucket'::text;
    END IF;
    RETURN done;
END
$$;
