-- Takes the transaction's advisory lock on provider event (provider $1, event
-- id $2, channel $3), so that two copies of one event recorded at once are
-- recorded one after the other, and the second sees the first (record_event.sql).
SELECT pg_advisory_xact_lock(1701209702, hashtext($1 || ':' || $3 || ':' || $2))
