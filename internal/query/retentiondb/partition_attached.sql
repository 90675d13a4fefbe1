-- Whether table $1 (a qualified, quoted name) is still attached to a parent,
-- whether its detach began and did not finish (DETACH … CONCURRENTLY stopped
-- half way: it is finished with FINALIZE), and whether that parent ($2, a
-- table name) can detach it CONCURRENTLY: not intents or attempts in the
-- distributed mode, which Citus detaches only plainly.
SELECT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass($1)),
       EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass($1) AND inhdetachpending),
       $2 = 'provider_events' OR NOT EXISTS (SELECT 1 FROM effectd.citus)
