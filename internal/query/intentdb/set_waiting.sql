-- Sets effectd.wakeup.waiting to $1, which tells effectd.enqueue whether to
-- NOTIFY effectd_wakeup on commit; true holds for $2 (until), so that a flag
-- a stopped or dead dispatcher left set ends by itself. Writes nothing when
-- the flag already says so, unless a true one has less than half of $2 left.
UPDATE effectd.wakeup
SET waiting = $1, until = CASE WHEN $1 THEN now() + $2::interval END
WHERE id = 1
  AND (waiting <> $1 OR ($1 AND (until IS NULL OR until < now() + $2::interval / 2)))
