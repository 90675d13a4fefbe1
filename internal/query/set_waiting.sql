-- Sets effectd.wakeup.waiting to $1, which tells effectd.enqueue whether to
-- NOTIFY effectd_wakeup on commit; writes nothing when it already says so.
UPDATE effectd.wakeup SET waiting = $1 WHERE id = 1 AND waiting <> $1
