-- +goose Up
-- The wake-up flag expires. effectd.enqueue NOTIFYs effectd_wakeup while a
-- dispatcher waits idle, and a transaction that NOTIFYs takes one lock for the
-- whole database at its commit and holds it through the commit's WAL flush:
-- such commits run one at a time. A dispatcher sets the flag when it goes idle
-- and clears it when it claims again; one that stopped or died while idle left
-- it set, and every producer's commit NOTIFYed, one at a time, until a
-- dispatcher ran again (a backlog enqueued while serve was stopped waited on
-- that lock about a thousand times a second). The flag now holds until
-- `until`, which an idle dispatcher pushes forward while it waits
-- (query.SetWaiting), and enqueue NOTIFYs only before it.
ALTER TABLE effectd.wakeup ADD COLUMN until timestamptz;
UPDATE effectd.wakeup SET waiting = false;

-- enqueue and enqueue_bucketed (migration 014) read the flag in one place
-- each; they are redefined with that read alone changed, so that their
-- owner, rights, SECURITY DEFINER and settings stay as the deployment made
-- them.
-- +goose StatementBegin
DO $$
DECLARE
    f   regprocedure;
    def text;
    n   int := 0;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace ns ON ns.oid = p.pronamespace
             WHERE ns.nspname = 'effectd' AND p.proname IN ('enqueue', 'enqueue_bucketed')
    LOOP
        def := pg_get_functiondef(f);
        IF (length(def) - length(replace(def, 'w.waiting', ''))) / length('w.waiting') <> 1 THEN
            RAISE EXCEPTION '%: want exactly one read of effectd.wakeup.waiting to change', f;
        END IF;
        EXECUTE replace(def, 'w.waiting', '(w.waiting AND w.until > now())');
        n := n + 1;
    END LOOP;
    IF n <> 2 THEN
        RAISE EXCEPTION 'want enqueue and enqueue_bucketed, changed % functions', n;
    END IF;
END
$$;
-- +goose StatementEnd
