-- +goose Up
-- Per-minute rollups of what happened to each channel's intents, kept by the
-- writers as changes happen (docs/console.md, "Charts"): the console's charts
-- read these rows alone, so a chart costs the same whatever history holds,
-- and the rows outlive the intents they summarize (they are pruned on their
-- own horizon, query.PruneRollups).

-- minute_rollups holds, per channel and UTC minute, how many intents moved
-- that minute into SENT, FAILED, IN_DOUBT and SKIPPED; how many deliveries
-- became accepted, delivered and undelivered; how many provider answers
-- carried an error and how many sends were put back to PENDING for a later
-- try (back-offs); and, sampled once a minute, the backlog (PENDING intents)
-- and the age of the oldest due one. Channel '*' is the sum over every
-- channel (the oldest due age: the largest), so the whole system's chart
-- reads one row a minute.
CREATE TABLE effectd.minute_rollups (
    channel            text NOT NULL,
    minute             timestamptz NOT NULL,
    sent               bigint NOT NULL DEFAULT 0,
    failed             bigint NOT NULL DEFAULT 0,
    in_doubt           bigint NOT NULL DEFAULT 0,
    skipped            bigint NOT NULL DEFAULT 0,
    accepted           bigint NOT NULL DEFAULT 0,
    delivered          bigint NOT NULL DEFAULT 0,
    undelivered        bigint NOT NULL DEFAULT 0,
    provider_errors    bigint NOT NULL DEFAULT 0,
    backoffs           bigint NOT NULL DEFAULT 0,
    backlog            bigint,           -- NULL: not sampled that minute
    oldest_due_seconds double precision, -- NULL: not sampled that minute
    PRIMARY KEY (channel, minute)
);

-- minute_latency holds, per channel (and '*'), UTC minute and latency slot,
-- how many intents were decided (SENT, FAILED, IN_DOUBT or SKIPPED by a
-- provider's answer) that minute with a latency, from the enqueue's commit to
-- that answer, in the slot: slot i holds latencies from 2^(i/2) ms up to
-- 2^((i+1)/2) ms (slot 0 from 0, slot 47 everything from about 3.3 h on). A
-- fixed log-scale histogram adds up over channels and minutes exactly, so a
-- p50 or p99 of any range is read from summed slots, within one slot's width
-- (a factor of 1.41).
CREATE TABLE effectd.minute_latency (
    channel text NOT NULL,
    minute  timestamptz NOT NULL,
    slot    smallint NOT NULL,
    n       bigint NOT NULL,
    PRIMARY KEY (channel, minute, slot)
);

-- minute_rollup_deltas takes, from each statement that moved intents, the
-- change to add to the rollups: measure is a column of minute_rollups, or
-- 'latency' with its slot. Writers only append, so concurrent completions
-- never wait on a rollup row; the folder adds the deltas to the rollups every
-- few seconds (query.FoldRollups), as it does the settled counts.
CREATE TABLE effectd.minute_rollup_deltas (
    channel text NOT NULL,
    minute  timestamptz NOT NULL,
    measure text NOT NULL,
    slot    smallint NOT NULL DEFAULT 0,
    n       bigint NOT NULL
);

-- roll_minutes appends the deltas of one UPDATE of intents, under the
-- statement's minute: each row that moved into SENT, FAILED, IN_DOUBT or
-- SKIPPED, into a delivery, out of SENDING with an error, or from SENDING back
-- to PENDING; and, for each row a provider's answer decided (out of SENDING
-- into SENT, FAILED, IN_DOUBT or SKIPPED), its latency slot. Nothing for a
-- claim. In the distributed mode, where Citus refuses triggers, the
-- statements that change intents append the same deltas (complete_bucket.sql,
-- settle_bucket.sql, set_delivery_bucket.sql).
-- +goose StatementBegin
CREATE FUNCTION effectd.roll_minutes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO effectd.minute_rollup_deltas (channel, minute, measure, slot, n)
    SELECT n.channel, date_trunc('minute', now()), m.measure, m.slot, count(*)
    FROM new_rows n
    JOIN old_rows o ON o.id = n.id AND o.created_at = n.created_at
    CROSS JOIN LATERAL (VALUES
        ('sent', 0, n.status = 'SENT' AND o.status <> 'SENT'),
        ('failed', 0, n.status = 'FAILED' AND o.status <> 'FAILED'),
        ('in_doubt', 0, n.status = 'IN_DOUBT' AND o.status <> 'IN_DOUBT'),
        ('skipped', 0, n.status = 'SKIPPED' AND o.status <> 'SKIPPED'),
        ('accepted', 0, n.delivery = 'accepted' AND o.delivery IS DISTINCT FROM 'accepted'),
        ('delivered', 0, n.delivery = 'delivered' AND o.delivery IS DISTINCT FROM 'delivered'),
        ('undelivered', 0, n.delivery = 'undelivered' AND o.delivery IS DISTINCT FROM 'undelivered'),
        ('provider_errors', 0, o.status = 'SENDING' AND n.status <> 'SENDING' AND n.last_error IS NOT NULL),
        ('backoffs', 0, o.status = 'SENDING' AND n.status = 'PENDING'),
        ('latency',
         least(47, greatest(0, floor(2 * ln(greatest(extract(epoch FROM now() - n.created_at) * 1000, 1)) / ln(2))))::int,
         o.status = 'SENDING' AND n.status IN ('SENT', 'FAILED', 'IN_DOUBT', 'SKIPPED'))
    ) AS m(measure, slot, hit)
    WHERE m.hit
    GROUP BY 1, 2, 3, 4;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER intents_roll_minutes AFTER UPDATE ON effectd.intents
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION effectd.roll_minutes();

-- The charts mark operator actions and policy changes read from the audit by
-- time, the whole system's and a channel's: a range reads only its own
-- entries.
CREATE INDEX audit_at ON effectd.audit (at);
CREATE INDEX audit_channel_at ON effectd.audit (channel, at) WHERE channel IS NOT NULL;
