-- +goose Up
-- Hourly rollups beside the minute ones (migration 024; docs/console.md,
-- "Charts"): the charts of 24 h and 7 d read a row an hour per channel
-- instead of sixty, so their read is 24 or 168 rows (and latency slots) per
-- channel, whatever history holds. The same fold that adds the writers'
-- deltas to minute_rollups and minute_latency adds them, in the same
-- transaction, to the hour holding their minute (query.AddRollups); the
-- backlog sample writes both (rollup_sample.sql). Hours are UTC hours.

-- hour_rollups holds, per channel (and '*', the whole system) and UTC hour,
-- the sums of that hour's minute_rollups counts; backlog and
-- oldest_due_seconds are the largest of the hour's minute samples (NULL: no
-- minute of the hour was sampled).
CREATE TABLE effectd.hour_rollups (
    channel            text NOT NULL,
    hour               timestamptz NOT NULL,
    sent               bigint NOT NULL DEFAULT 0,
    failed             bigint NOT NULL DEFAULT 0,
    in_doubt           bigint NOT NULL DEFAULT 0,
    skipped            bigint NOT NULL DEFAULT 0,
    accepted           bigint NOT NULL DEFAULT 0,
    delivered          bigint NOT NULL DEFAULT 0,
    undelivered        bigint NOT NULL DEFAULT 0,
    provider_errors    bigint NOT NULL DEFAULT 0,
    backoffs           bigint NOT NULL DEFAULT 0,
    backlog            bigint,
    oldest_due_seconds double precision,
    PRIMARY KEY (channel, hour)
);

-- hour_latency holds, per channel (and '*'), UTC hour and latency slot
-- (migration 024's fixed log-scale slots), the sum of that hour's
-- minute_latency counts: a histogram of fixed slots adds up exactly, so an
-- hour's p50 and p99 are read from it within one slot, as a minute's are.
CREATE TABLE effectd.hour_latency (
    channel text NOT NULL,
    hour    timestamptz NOT NULL,
    slot    smallint NOT NULL,
    n       bigint NOT NULL,
    PRIMARY KEY (channel, hour, slot)
);

-- The hours of the minutes already kept.
INSERT INTO effectd.hour_rollups
    (channel, hour, sent, failed, in_doubt, skipped, accepted, delivered, undelivered, provider_errors, backoffs,
     backlog, oldest_due_seconds)
SELECT channel, date_trunc('hour', minute, 'UTC'), sum(sent), sum(failed), sum(in_doubt), sum(skipped),
       sum(accepted), sum(delivered), sum(undelivered), sum(provider_errors), sum(backoffs),
       max(backlog), max(oldest_due_seconds)
FROM effectd.minute_rollups
GROUP BY 1, 2;

INSERT INTO effectd.hour_latency (channel, hour, slot, n)
SELECT channel, date_trunc('hour', minute, 'UTC'), slot, sum(n)
FROM effectd.minute_latency
GROUP BY 1, 2, 3;
