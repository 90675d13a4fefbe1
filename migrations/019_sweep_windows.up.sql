-- +goose Up
-- The windows the scheduled reconciliation sweep finished (README,
-- "Reconciliation sweep"; docs/guarantees.md, "Sweeps"): a row per window of
-- intents' creation times [since, until), written when its sweep finished.
-- The next scheduled sweep of the channel resumes from the latest until,
-- whichever instance runs it and however late, so that a late, skipped or
-- failed run leaves no gap; a sweep's report reads the rows that meet its
-- window to say which spans the schedule covered. Rows older than 30 days are
-- deleted as new ones are written (the latest of a channel never is).
--
-- A row per channel per scheduled run, written and read only by effectd
-- through the coordinator: in the distributed mode it stays a table of the
-- coordinator, like the other small tables effectd alone reads
-- (migrations/citus/distribute.sql, step 5).
CREATE TABLE effectd.sweep_windows (
    channel     text        NOT NULL,
    since       timestamptz NOT NULL,
    until       timestamptz NOT NULL,
    findings    int         NOT NULL,
    finished_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (channel, until, since),
    CHECK (since < until)
);
