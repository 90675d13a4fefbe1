-- Takes session advisory lock $1 if it is free; returns whether it was taken.
SELECT pg_try_advisory_lock($1)
