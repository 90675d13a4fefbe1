-- Releases session advisory lock $1.
SELECT pg_advisory_unlock($1)
