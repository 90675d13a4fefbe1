-- +goose Up
-- roll_minutes (migration 024) appends the same deltas of one UPDATE of
-- intents, under the statement's minute, more cheaply (docs/performance.md,
-- "Where each microsecond goes"):
--
-- - a statement whose new rows are all SENDING without a delivery (a claim,
--   a lease's renewal) returns at once: every measure needs a new row out of
--   SENDING (sent, failed, in_doubt, skipped, provider_errors, backoffs,
--   latency) or with a delivery (accepted, delivered, undelivered);
-- - otherwise the joined transition tables are read once, keeping only rows
--   whose status or delivery changed (no measure counts another), and each
--   measure is a count(*) FILTER of that one pass, grouped by channel and
--   latency slot (the slot computed only for a row a provider's answer
--   decided: the slot's group holds those rows alone, so its count is the
--   slot's); the few groups are then unpivoted and summed into one delta per
--   channel, measure and slot, instead of a row of ten measures per changed
--   row.
--
-- The function sets no planner option: with enable_nestloop off for the
-- function (a hash join of the transition tables), a partition detach left
-- pending by a crash could no longer be finalized while the checker's
-- producers moved rows across days (the checker's seed 1796318715835546181).
--
-- Each FILTER is the condition migration 024 gave its measure, so the rows
-- appended are the same (migrations/roll_minutes_test.go runs both bodies on
-- the same statements).
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
        SELECT n.channel,
               CASE WHEN o.status = 'SENDING' AND n.status IN ('SENT', 'FAILED', 'IN_DOUBT', 'SKIPPED') THEN
                   least(47, greatest(0, floor(2 * ln(greatest(extract(epoch FROM now() - n.created_at) * 1000, 1)) / ln(2))))::int
               END AS latency_slot,
               count(*) AS changed,
               count(*) FILTER (WHERE n.status = 'SENT' AND o.status <> 'SENT') AS sent,
               count(*) FILTER (WHERE n.status = 'FAILED' AND o.status <> 'FAILED') AS failed,
               count(*) FILTER (WHERE n.status = 'IN_DOUBT' AND o.status <> 'IN_DOUBT') AS in_doubt,
               count(*) FILTER (WHERE n.status = 'SKIPPED' AND o.status <> 'SKIPPED') AS skipped,
               count(*) FILTER (WHERE n.delivery = 'accepted' AND o.delivery IS DISTINCT FROM 'accepted') AS accepted,
               count(*) FILTER (WHERE n.delivery = 'delivered' AND o.delivery IS DISTINCT FROM 'delivered') AS delivered,
               count(*) FILTER (WHERE n.delivery = 'undelivered' AND o.delivery IS DISTINCT FROM 'undelivered') AS undelivered,
               count(*) FILTER (WHERE o.status = 'SENDING' AND n.status <> 'SENDING' AND n.last_error IS NOT NULL) AS provider_errors,
               count(*) FILTER (WHERE o.status = 'SENDING' AND n.status = 'PENDING') AS backoffs
        FROM new_rows n
        JOIN old_rows o ON o.id = n.id AND o.created_at = n.created_at
        WHERE n.status IS DISTINCT FROM o.status OR n.delivery IS DISTINCT FROM o.delivery
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
