-- Reads the data of console session $1 (a token) unless it has expired.
SELECT data FROM effectd.console_sessions WHERE token = $1 AND expiry > now()
