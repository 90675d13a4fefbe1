-- Saves console session $1 with data $2 until $3, and drops the sessions that
-- expired an hour ago.
WITH gone AS (DELETE FROM effectd.console_sessions WHERE expiry < now() - interval '1 hour')
INSERT INTO effectd.console_sessions (token, data, expiry) VALUES ($1, $2, $3)
ON CONFLICT (token) DO UPDATE SET data = EXCLUDED.data, expiry = EXCLUDED.expiry
