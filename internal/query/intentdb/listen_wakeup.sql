-- Listens for effectd_wakeup, which effectd.enqueue notifies on commit while a
-- dispatcher waits. ListenWakeup sends it without this comment, so that
-- pg_stat_activity shows a listening connection as exactly this statement.
LISTEN effectd_wakeup
