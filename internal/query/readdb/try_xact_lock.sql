-- Takes transaction advisory lock $1 if it is free (released when the
-- transaction ends); returns whether it was taken.
SELECT pg_try_advisory_xact_lock($1)
