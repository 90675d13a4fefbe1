-- +goose Up
-- Each intent keeps the trace context of the producer that enqueued it (W3C
-- traceparent, docs/tracing.md): the dispatcher starts each attempt's span in
-- that trace. The column's default reads the producer's transaction-local
-- setting effectd.traceparent, so every writer of intents carries it with no
-- change of its own: effectd.enqueue, effectd.enqueue_many and the
-- notification of a producer's cancel, in both storage modes (a default is
-- evaluated where the row is built: on the coordinator in the distributed
-- mode, whose intents get the column from this ALTER TABLE as any other).
--
--   BEGIN;
--   SET LOCAL effectd.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
--   SELECT effectd.enqueue('order-1', 'sms', '{"to": "+15551230001", "body": "hi"}');
--   COMMIT;
--
-- The Go client sets it from the caller's context. A value that is not a
-- version-00 traceparent (the W3C form, lower-case hex) is not kept: the
-- intent has none. With the setting unset the default is NULL, evaluated once
-- by this ALTER TABLE for the rows already there (no rewrite of the table).
ALTER TABLE effectd.intents ADD COLUMN traceparent text
    DEFAULT CASE WHEN current_setting('effectd.traceparent', true) ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
                 THEN current_setting('effectd.traceparent', true) END;
