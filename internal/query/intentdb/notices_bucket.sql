-- The producer's notifications (README, "Telling the producer") in the
-- distributed mode, written by the statement that moved the rows: the CTEs
-- below end every statement of this mode that settles an intent or moves its
-- delivery (complete, settle, operate, operate_bulk, settle_by_event,
-- set_delivery, record_poll). withNotices (notices_bucket.go) puts them
-- into each, MOVED naming that statement's CTE of the rows it moved and
-- $BUCKET its bucket parameter. MOVED has, for each moved row, the intent as
-- the move left it (id, event_id, channel, status, delivery,
-- delivery_detail, provider_ref, last_error, idempotency_key, traceparent),
-- its payload where last_error is set (null otherwise: the rows come back to
-- the coordinator), and whether the status (status_moved) and the delivery
-- (delivery_moved) moved.
--
-- As the notify trigger writes them on one PostgreSQL (migration 009's
-- notify_outcomes): each outcome a row reached (its status; its delivery,
-- when it moved) that its channel's notify lists becomes a PENDING intent of
-- the notify channel on this bucket, with event id <idempotency_key>:<outcome>
-- (notify_key), ordering key the source's key, the source's traceparent (its
-- attempts join the source's trace), and the copy of the source as the
-- outcome left it, the values its channel redacts masked in last_error;
-- occurred_at none. PENDING is counted in no delta. Told once: seen finds the
-- event on the bucket in every day partition (one index probe each), ON
-- CONFLICT in today's; the source row, locked by the update until the
-- transaction ends, keeps a second writer of the same outcome out until this
-- one's notice is there to be seen. Citus runs each of these CTEs as a
-- statement of its own (seen on the bucket's shard, the rest from
-- intermediate results on the coordinator, the insert copied to the shard);
-- an INSERT … SELECT that joins a reference table to intermediate results
-- inserts nothing there, so the channels are read in notices alone.
outcomes AS (
    SELECT id, 1 AS ord, lower(status) AS outcome FROM MOVED WHERE status_moved
    UNION ALL
    SELECT id, 2, delivery FROM MOVED WHERE delivery_moved
),
notices AS (
    SELECT x.* FROM (
        SELECT u.id, o.ord, u.idempotency_key AS key, u.traceparent, c.notify ->> 'channel' AS target, tc.max_payload,
               effectd.notify_key(u.idempotency_key, o.outcome) AS event_id,
               jsonb_build_object('type', 'effect.' || o.outcome, 'intent', jsonb_build_object(
                   'id', u.id, 'event_id', u.event_id, 'channel', u.channel, 'status', u.status,
                   'delivery', u.delivery, 'delivery_detail', u.delivery_detail, 'provider_ref', u.provider_ref,
                   'last_error', effectd.redact_text(u.last_error, u.payload, c.redact))) AS payload
        FROM MOVED u
        JOIN outcomes o ON o.id = u.id
        JOIN effectd.channels c ON c.name = u.channel AND c.notify IS NOT NULL
        JOIN effectd.channels tc ON tc.name = c.notify ->> 'channel'
        WHERE (c.notify -> 'on') ? o.outcome
    ) x
    WHERE pg_column_size(x.payload) <= x.max_payload
),
-- the probe: these events already on the bucket, in any day partition
seen AS (
    SELECT d.event_id, d.channel
    FROM effectd.intents d
    WHERE d.bucket = $BUCKET AND d.event_id IN (SELECT event_id FROM notices)
),
notified AS (
    INSERT INTO effectd.intents (bucket, event_id, channel, payload, idempotency_key, next_attempt_at, ordering_key, traceparent)
    SELECT $BUCKET, n.event_id, n.target, n.payload,
           CASE WHEN octet_length(n.target) + 1 + octet_length(n.event_id) <= 255 THEN n.target || ':' || n.event_id
                ELSE effectd.idempotency_key(n.target, n.event_id) END,
           now(), n.key, n.traceparent
    FROM notices n
    LEFT JOIN seen s ON s.event_id = n.event_id AND s.channel = n.target
    WHERE s.event_id IS NULL
    ORDER BY n.id, n.ord
    ON CONFLICT DO NOTHING
)
