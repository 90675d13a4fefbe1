-- +goose Up
-- roll_minutes (migration 028) pairs each row's old and new version by
-- grouping instead of joining the transition tables, so the cost of a
-- firing grows with its rows, whatever plan PL/pgSQL keeps
-- (docs/performance.md, "Where each microsecond goes"):
--
-- PL/pgSQL plans the function's INSERT once and keeps the plan. Planned on a
-- first firing of one row, the join of old_rows and new_rows was a nested
-- loop, which a completion of 131 rows ran as 17,030 comparisons. Here both
-- tables are read once into one input, each row tagged with its side, and
-- grouped by (id, created_at): a group holds a row's old and new version, and
-- its measures are read from them with FILTERed aggregates. A hash or sort
-- aggregate of 2n rows, whichever plan is kept, and no planner option set
-- (migration 028 says why a function-level setting was taken out).
--
-- A group without both versions (a row whose created_at an UPDATE changed)
-- counts nothing, as the join of migration 028 did not match it; every other
-- condition is 028's (migrations/roll_minutes_test.go runs migration 024's
-- body beside it and requires the same deltas).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION effectd.roll_minutes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_rows WHERE status <> 'SENDING' OR delivery IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    INSERT INTO effectd.minute_rollup_deltas (channel, minute, measure, slot, n)
    SELECT g.channel, date_trunc('minute', now()), m.measure, m.slot, sum(m.n)::bigint
    FROM (
        SELECT r.channel,
               CASE WHEN r.o_status = 'SENDING' AND r.n_status IN ('SENT', 'FAILED', 'IN_DOUBT', 'SKIPPED') THEN
                   least(47, greatest(0, floor(2 * ln(greatest(extract(epoch FROM now() - r.created_at) * 1000, 1)) / ln(2))))::int
               END AS latency_slot,
               count(*) AS changed,
               count(*) FILTER (WHERE r.n_status = 'SENT' AND r.o_status <> 'SENT') AS sent,
               count(*) FILTER (WHERE r.n_status = 'FAILED' AND r.o_status <> 'FAILED') AS failed,
               count(*) FILTER (WHERE r.n_status = 'IN_DOUBT' AND r.o_status <> 'IN_DOUBT') AS in_doubt,
               count(*) FILTER (WHERE r.n_status = 'SKIPPED' AND r.o_status <> 'SKIPPED') AS skipped,
               count(*) FILTER (WHERE r.n_delivery = 'accepted' AND r.o_delivery IS DISTINCT FROM 'accepted') AS accepted,
               count(*) FILTER (WHERE r.n_delivery = 'delivered' AND r.o_delivery IS DISTINCT FROM 'delivered') AS delivered,
               count(*) FILTER (WHERE r.n_delivery = 'undelivered' AND r.o_delivery IS DISTINCT FROM 'undelivered') AS undelivered,
               count(*) FILTER (WHERE r.o_status = 'SENDING' AND r.n_status <> 'SENDING' AND r.n_failed) AS provider_errors,
               count(*) FILTER (WHERE r.o_status = 'SENDING' AND r.n_status = 'PENDING') AS backoffs
        FROM (
            SELECT v.id, v.created_at,
                   max(v.channel) FILTER (WHERE v.new) AS channel,
                   max(v.status) FILTER (WHERE NOT v.new) AS o_status,
                   max(v.status) FILTER (WHERE v.new) AS n_status,
                   max(v.delivery) FILTER (WHERE NOT v.new) AS o_delivery,
                   max(v.delivery) FILTER (WHERE v.new) AS n_delivery,
                   bool_or(v.last_error IS NOT NULL) FILTER (WHERE v.new) AS n_failed,
                   bool_or(NOT v.new) AS has_old,
                   bool_or(v.new) AS has_new
            FROM (
                SELECT false AS new, id, created_at, channel, status, delivery, last_error FROM old_rows
                UNION ALL
                SELECT true, id, created_at, channel, status, delivery, last_error FROM new_rows
            ) AS v
            GROUP BY v.id, v.created_at
        ) AS r
        WHERE r.has_old AND r.has_new
          AND (r.n_status IS DISTINCT FROM r.o_status OR r.n_delivery IS DISTINCT FROM r.o_delivery)
        GROUP BY 1, 2
    ) AS g
    CROSS JOIN LATERAL (VALUES
        ('sent', 0, g.sent),
        ('failed', 0, g.failed),
        ('in_doubt', 0, g.in_doubt),
        ('skipped', 0, g.skipped),
        ('accepted', 0, g.accepted),
        ('delivered', 0, g.delivered),
        ('undelivered', 0, g.undelivered),
        ('provider_errors', 0, g.provider_errors),
        ('backoffs', 0, g.backoffs),
        ('latency', g.latency_slot, CASE WHEN g.latency_slot IS NOT NULL THEN g.changed ELSE 0 END)
    ) AS m(measure, slot, n)
    WHERE m.n > 0
    GROUP BY g.channel, m.measure, m.slot;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
