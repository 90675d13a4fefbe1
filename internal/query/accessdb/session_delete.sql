-- Deletes console session $1.
DELETE FROM effectd.console_sessions WHERE token = $1
