-- +goose Up
-- Counts of settled intents kept as changes happen (docs/scale.md): reads of
-- counts by channel and status cost the same whatever history holds. Live
-- states (PENDING, SENDING, IN_DOUBT) are not kept here: they are counted from
-- their partial indexes, whose size is the backlog.

-- intent_counts holds, per channel, settled status (SENT, FAILED, SKIPPED,
-- CANCELLED) and delivery ('' for none), how many intents are in it, as of
-- the last fold of the deltas.
CREATE TABLE effectd.intent_counts (
    channel  text NOT NULL,
    status   text NOT NULL,
    delivery text NOT NULL,
    n        bigint NOT NULL,
    PRIMARY KEY (channel, status, delivery)
);

-- intent_count_deltas takes the net change of each statement that moved rows
-- into or out of a settled state. Writers only append, so concurrent
-- completions, callbacks and prunes never wait on a counter row; the pruner
-- folds the deltas into intent_counts (query.FoldCounts), and readers add the
-- few not folded yet.
CREATE TABLE effectd.intent_count_deltas (
    channel  text NOT NULL,
    status   text NOT NULL,
    delivery text NOT NULL,
    n        bigint NOT NULL
);

-- count_settled appends the net change of one UPDATE or DELETE of intents, by
-- channel, settled status and delivery; nothing when no row entered or left a
-- settled state (a claim, a retry). A TRUNCATE forgets every count. An
-- enqueue's INSERT never calls it (a new row is PENDING); a row inserted
-- already settled, as an import does, is counted by count_inserted.
-- +goose StatementBegin
CREATE FUNCTION effectd.count_settled() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO effectd.intent_count_deltas (channel, status, delivery, n)
        SELECT channel, status, delivery, sum(n)
        FROM (SELECT channel, status, coalesce(delivery, '') AS delivery, 1 AS n
              FROM new_rows WHERE status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')
              UNION ALL
              SELECT channel, status, coalesce(delivery, ''), -1
              FROM old_rows WHERE status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')) AS d
        GROUP BY channel, status, delivery
        HAVING sum(n) <> 0;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO effectd.intent_count_deltas (channel, status, delivery, n)
        SELECT channel, status, coalesce(delivery, ''), -count(*)
        FROM old_rows WHERE status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')
        GROUP BY 1, 2, 3;
    ELSE -- TRUNCATE
        DELETE FROM effectd.intent_count_deltas;
        DELETE FROM effectd.intent_counts;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- count_inserted counts one row inserted already settled.
-- +goose StatementBegin
CREATE FUNCTION effectd.count_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO effectd.intent_count_deltas (channel, status, delivery, n)
    VALUES (NEW.channel, NEW.status, coalesce(NEW.delivery, ''), 1);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- The first count reads every existing row once. Writers wait for it (the
-- lock below lets reads go on): the trigger and the count see the same rows,
-- so no change is missed or counted twice. README, "Scale-out", gives its
-- duration at 10 M rows.
LOCK TABLE effectd.intents IN SHARE ROW EXCLUSIVE MODE;

CREATE TRIGGER intents_count_update AFTER UPDATE ON effectd.intents
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION effectd.count_settled();
CREATE TRIGGER intents_count_delete AFTER DELETE ON effectd.intents
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION effectd.count_settled();
-- The WHEN clause is evaluated for each inserted row without calling the
-- function: an enqueue pays for a comparison, nothing more.
CREATE TRIGGER intents_count_insert AFTER INSERT ON effectd.intents
    FOR EACH ROW WHEN (NEW.status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED'))
    EXECUTE FUNCTION effectd.count_inserted();
CREATE TRIGGER intents_count_truncate AFTER TRUNCATE ON effectd.intents
    FOR EACH STATEMENT EXECUTE FUNCTION effectd.count_settled();

INSERT INTO effectd.intent_counts (channel, status, delivery, n)
SELECT channel, status, coalesce(delivery, ''), count(*)
FROM effectd.intents
WHERE status IN ('SENT', 'FAILED', 'SKIPPED', 'CANCELLED')
GROUP BY 1, 2, 3;

-- id_marks records, every few seconds while intents are being added, the last
-- id the intents' sequence had handed out (query.MarkIDs). Every row created at
-- or after a mark's time has a higher id: its id was drawn when it was
-- inserted, after its transaction began. A list from a time on (since) starts
-- at the last mark before that time, reading only the rows added since then.
CREATE TABLE effectd.id_marks (
    at     timestamptz PRIMARY KEY,
    max_id bigint NOT NULL
);
